"""Latency of the journal in the order path, against a real PostgreSQL (durable commits).

0. The raw limit, in the same run: one-row durable commits on a bare psycopg connection (an autocommit
   INSERT into a scratch table), nothing else running; with how many took over 20 ms (the disk's stalls,
   which show in every measurement below: one of 300 ms holds up the 30 orders timed in it).
1. Durable acknowledgement of an order event while a feed appends 50,000 events per second: an order
   event is appended every 10 ms and timed until `flush()` returns (what `before_send` waits for).
2. Tick to wire inside the process: from a quote entering the trading loop to the order it causes being
   handed to the venue adapter, for both durability policies, with the ema_cross strategy.

    .venv/bin/python bench/journal_latency.py [--seconds 10]

Uses FOXHUNT_DSN or the embedded cluster in FOXHUNT_STATE_DIR.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import time
import uuid

import anyio
import psycopg

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.orders import OrderSubmitted
from foxhunt.messages.system import RunStarted
from foxhunt.runtime.clock import WallClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.recovery import build_kernel

META = dict(config=b"{}", config_digest="bench", fingerprint={})
FEED_RATE = 50_000


def percentiles(samples_ns: list[int]) -> str:
    ms = sorted(s / 1e6 for s in samples_ns)
    p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    stalls = sum(x > 20 for x in ms)
    return f"p50 {p50:.3f} ms  p99 {p99:.3f} ms  max {ms[-1]:.3f} ms  (n={len(ms)}, {stalls} over 20 ms)"


def bare_commits(dsn: str, seconds: float) -> list[int]:
    samples: list[int] = []
    table = f"bench_bare_commit_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, payload bytea NOT NULL)")
        try:
            payload, deadline, i = b"x" * 100, time.monotonic() + seconds, 0
            while time.monotonic() < deadline:
                i += 1
                started = time.perf_counter_ns()
                conn.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, payload))
                samples.append(time.perf_counter_ns() - started)
        finally:
            conn.execute(f"DROP TABLE {table}")
    return samples


async def durable_ack(store: PostgresJournalStore, quotes: list, seconds: float) -> list[int]:
    samples: list[int] = []
    async with store.writer(f"bench-ack-{uuid.uuid4().hex[:8]}", **META) as writer:
        async def feed() -> None:
            per_ms = FEED_RATE // 1000
            start = time.monotonic()
            for i in range(0, len(quotes), per_ms):
                for q in quotes[i : i + per_ms]:
                    writer.append(q)
                if writer.backlogged:
                    await writer.relieve()
                ahead = start + (i + per_ms) / FEED_RATE - time.monotonic()
                await anyio.sleep(max(ahead, 0))

        async def orders(tg: anyio.abc.TaskGroup) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                await anyio.sleep(0.01)
                started = time.perf_counter_ns()
                writer.append(OrderSubmitted(ts_event=0, ts_init=0, order_id="bench", symbol="EURUSD"))
                await writer.flush()
                samples.append(time.perf_counter_ns() - started)
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            tg.start_soon(orders, tg)
    return samples


class TimedVenue:
    """The simulated venue, noting when each command reaches it."""

    def __init__(self, venue: SimVenue) -> None:
        self.venue, self.name, self.sent_at = venue, venue.name, []

    def connect(self):
        return self.venue.connect()

    def send(self, cmd):
        self.sent_at.append(time.perf_counter_ns())
        return self.venue.send(cmd)

    def on_market(self, msg):
        return self.venue.on_market(msg)


async def tick_to_wire(store: PostgresJournalStore, trading, quotes: list, durability: str, rate: int | None = None,
                       journal: str | None = None) -> list[int]:
    """Samples (ns) from a quote entering the loop to the order it causes reaching the venue adapter; quotes as
    fast as the loop takes them, or `rate` a second on the wall clock. The journal starts with a RunStarted as
    a daemon's does, so that a reader can rebuild its kernel (bench/web_stream.py)."""
    kernel = build_kernel(trading)
    venue = TimedVenue(SimVenue(kernel.instruments, trading.venue, WallClock()))
    samples: list[int] = []
    async with store.writer(journal or f"bench-t2w-{uuid.uuid4().hex[:8]}", **META) as writer:
        loop = TradingLoop(kernel, venue, writer, durability)
        now = time.time_ns()
        await loop.submit(RunStarted(ts_event=now, ts_init=now, run_id=1, seed=trading.seed, clock="wall",
                                     config_digest=trading.digest(), config=trading.to_json(), fingerprint={}))
        for msg in venue.connect():
            await loop.submit(msg)
        begun = time.perf_counter()
        for i, q in enumerate(quotes):
            if rate is not None and (wait := begun + i / rate - time.perf_counter()) > 0:
                await anyio.sleep(wait)
            before = len(venue.sent_at)
            started = time.perf_counter_ns()
            await loop.take(q)
            if len(venue.sent_at) > before:
                samples.append(venue.sent_at[before] - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    cfg = config.load(None)
    dsn = bootstrap.resolve_dsn(cfg)
    store = anyio.run(bootstrap.open_store, cfg, dsn)
    trading = cfg.trading()
    eurusd = trading.build_instruments()["EURUSD"]
    quotes = list(SyntheticFeed(7, int(FEED_RATE * (args.seconds + 2)), eurusd, parse_fixed("1.1"), WallClock()))
    run = lambda fn, *a: anyio.run(fn, *a, backend_options={"use_uvloop": True})  # noqa: E731
    bare = bare_commits(dsn, args.seconds / 2)
    print(f"bare durable one-row commit, nothing else running: {percentiles(bare)}")
    print(f"durable ack of an order event, feed at {FEED_RATE:,} events/s: "
          f"{percentiles(run(durable_ack, store, quotes, args.seconds))}")
    for durability in ("before_send", "async"):
        samples = run(tick_to_wire, store, trading, quotes[:200_000], durability)
        print(f"tick to wire, durability {durability:11s}: {percentiles(samples)}")


if __name__ == "__main__":
    main()
