"""The kernel's memory over a long run: the process's resident set size as quotes go through the trading
loop (ema_cross, which trades about once in thirty quotes, through the simulated venue, with a journal
that keeps nothing), sampled every `--every` quotes. Flat means the kernel forgets what it no longer
needs: closed orders beyond the newest core/orders.CLOSED_KEPT.

    .venv/bin/python bench/kernel_memory.py [--quotes 3000000] [--every 500000]

Quotes are made as they are fed (SyntheticFeed is a generator), so the feed holds no memory of its own.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import os
import time

import anyio

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


async def main(quotes: int, every: int) -> None:
    trading = config.load(None, env={}).trading()
    kernel = build_kernel(trading)
    clock = EventClock()
    loop = TradingLoop(kernel, SimVenue(kernel.instruments, trading.venue, clock), DiscardingJournal())
    feed = SyntheticFeed(7, quotes, kernel.instruments["EURUSD"], parse_fixed("1.10000"), clock)
    take = loop.take_nowait
    started = time.perf_counter()
    print(f"compiled: {compiled.compiled_in_use()}")
    print(f"{'quotes':>10} {'orders sent':>12} {'orders kept':>12} {'RSS MiB':>9} {'seconds':>8}")
    for n, quote in enumerate(feed, 1):
        rest = take(quote)
        if rest is not None:
            await rest
        if n % every == 0:
            orders = kernel.orders
            kept = len(orders.by_id)
            print(f"{n:10,} {getattr(orders, 'count', kept):12,} {kept:12,} {rss_mib():9.1f}"
                  f" {time.perf_counter() - started:8.1f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quotes", type=int, default=3_000_000)
    p.add_argument("--every", type=int, default=500_000)
    a = p.parse_args()
    anyio.run(main, a.quotes, a.every, backend_options={"use_uvloop": True})
