"""Instructions per quote through the trading loop, counted by valgrind: an A/B measure that noise cannot move.

The developers' machines are virtual and shared: the same code's quotes per second wander by 30% from one
run to the next (docs/benchmarks.md), which hides a 10% change. valgrind's callgrind counts the
instructions the process executes instead, the same for the same code and inputs whatever else the
machine does. This runs the loop of kernel_throughput.py (TradingLoop.take_nowait, simulated venue, a journal
that keeps nothing) under callgrind twice, over `--small` and `--large` quotes, and prints the
difference per quote, so start-up and imports cancel out. Compare two commits by running it in each.

    .venv/bin/python bench/kernel_instructions.py [--strategy ema_cross|zscore|flip|none] [--small 5000] [--large 25000]

Needs valgrind (`apt-get install valgrind`). About a minute per strategy. The count still moves by about
2% between runs: ids, and so the hashes of enum members and the order of some dict probes, differ.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import sys
from pathlib import Path

import anyio
import callgrind
import msgspec

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.recovery import build_kernel

HERE = Path(__file__).resolve().parent


def kernel_for(strategy: str) -> Kernel:
    trading = config.load(None, env={}).trading()
    instruments = trading.build_instruments()
    if strategy == "none":
        return Kernel(instruments, [], PreTradeGate(trading.risk, instruments))
    if strategy == "flip":
        sys.path.insert(0, str(HERE))
        from order_round_trip import Flip  # an order on every quote

        return Kernel(instruments, [Flip()], PreTradeGate(trading.risk, instruments))
    params = msgspec.structs.replace(trading.strategy, name=strategy)
    return build_kernel(msgspec.structs.replace(trading, strategy=params))


def run(strategy: str, quotes: int, made: int) -> None:
    """`quotes` through the loop, of `made` generated (the same number in both counted runs: generating
    them is not what is measured)."""
    trading = config.load(None, env={}).trading()
    eurusd = trading.build_instruments()["EURUSD"]
    feed = list(SyntheticFeed(7, made, eurusd, parse_fixed("1.10000"), EventClock()))[:quotes]
    kernel = kernel_for(strategy)

    async def go() -> None:
        loop = TradingLoop(kernel, SimVenue(kernel.instruments, trading.venue, EventClock()), DiscardingJournal())
        take = loop.take_nowait
        for quote in feed:
            rest = take(quote)
            if rest is not None:
                await rest

    anyio.run(go)


def count(strategy: str, quotes: int, made: int) -> int:
    return callgrind.count(__file__, "--strategy", strategy, "--run", str(quotes), "--made", str(made))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="ema_cross", help="ema_cross, zscore, flip or none")
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the process valgrind counts
    parser.add_argument("--made", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        return run(args.strategy, args.run, args.made)
    callgrind.require_valgrind()
    count(args.strategy, args.small, args.large)  # a first run fills numba's cache of the risk kernels
    small, large = count(args.strategy, args.small, args.large), count(args.strategy, args.large, args.large)
    per_quote = (large - small) / (args.large - args.small)
    how = "compiled" if compiled.compiled_in_use() else "as Python"
    print(f"{args.strategy}: {per_quote:,.0f} instructions per quote ({args.large - args.small} quotes counted, {how})")


if __name__ == "__main__":
    main()
