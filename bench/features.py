"""The feature pipeline's speed (issue 21): the batch form in events per second, the incremental form in
nanoseconds per event.

- batch: `batch(spec, columns)` over one symbol's events, already in arrays (the kernel alone: what a
  training run's feature pass costs once the journal is read), and, apart, `Columns.of` turning the
  decoded messages into those arrays;
- incremental: `FeaturePipeline.update(msg)` per message, each call timed with perf_counter_ns (which
  adds its own few tens of nanoseconds), median and 99th percentile; and the mean of an untimed loop.

Events: quotes with sizes and trades with aggressors, 4 to 1 (synthetic, seeded), or with --ticks FILE a
real tick file in the layout of ../shared/data/histdata-eurusd-ticks-2020-01-01.csv (quotes only).

    .venv/bin/python bench/features.py [--events 2000000] [--rounds 5] [--ticks FILE]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import platform
import statistics
import time

import numpy as np

from foxhunt import config
from foxhunt.adapters.feeds import open_feed
from foxhunt.core.features import Columns, FeaturePipeline, FeatureSpec, batch
from foxhunt.messages.market import MARKET_DATA_TYPES, AggressorSide, QuoteTick, TradeTick
from foxhunt.runtime.clock import EventClock


def synthetic(n: int) -> list:
    rng = np.random.default_rng(7)
    mids = np.round(1.1e9 * np.exp(np.cumsum(rng.normal(0, 1e-4, n))), -4).astype(np.int64)
    gaps = rng.integers(1, 200_000_000, n).cumsum() + 1_700_000_000_000_000_000
    out = []
    for i in range(n):
        ts, mid = int(gaps[i]), int(mids[i])
        if i % 5 == 4:
            side = AggressorSide.BUYER if rng.random() < 0.5 else AggressorSide.SELLER
            out.append(TradeTick(ts_event=ts, ts_init=ts, symbol="EURUSD", price=mid, size=10**15, aggressor=side))
        else:
            out.append(QuoteTick(ts_event=ts, ts_init=ts, symbol="EURUSD", bid=mid - 10_000, ask=mid + 10_000,
                                 bid_size=int(rng.integers(1, 9)) * 10**15, ask_size=int(rng.integers(1, 9)) * 10**15))
    return out


def ticks(path: str, n: int) -> list:
    out = []
    instruments = config.Config().trading().build_instruments()
    for msg in open_feed(f"csv:{path},symbol=EURUSD", instruments, EventClock()):
        if type(msg) in MARKET_DATA_TYPES:
            out.append(msg)
            if len(out) == n:
                break
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ticks", metavar="FILE")
    args = p.parse_args()
    spec = FeatureSpec()
    msgs = ticks(args.ticks, args.events) if args.ticks else synthetic(args.events)
    n = len(msgs)
    print(f"{platform.processor() or platform.machine()}, {n} events ({'ticks ' + args.ticks if args.ticks else 'synthetic'})")

    started = time.perf_counter()
    columns = Columns.of(msgs)
    to_columns = time.perf_counter() - started
    batch(spec, Columns(columns.ts[:10], columns.kind[:10], columns.values[:10]))  # compiled before timing
    rates = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        rows, _ = batch(spec, columns)
        rates.append(n / (time.perf_counter() - started))
    print(f"batch (kernel):        median {statistics.median(rates) / 1e6:.2f}M events/s over {args.rounds} rounds"
          f" (min {min(rates) / 1e6:.2f}M, max {max(rates) / 1e6:.2f}M)")
    print(f"Columns.of (messages): {n / to_columns / 1e6:.2f}M events/s")

    clock = time.perf_counter_ns
    per_round_median, per_round_p99, loop_mean = [], [], []
    for _ in range(args.rounds):
        pipeline = FeaturePipeline(spec)
        update = pipeline.update
        took = np.empty(n, dtype=np.int64)
        for i, msg in enumerate(msgs):
            t0 = clock()
            update(msg)
            took[i] = clock() - t0
        per_round_median.append(float(np.median(took)))
        per_round_p99.append(float(np.percentile(took, 99)))
        pipeline = FeaturePipeline(spec)
        update = pipeline.update
        t0 = clock()
        for msg in msgs:
            update(msg)
        loop_mean.append((clock() - t0) / n)
    print(f"incremental (update):  median {statistics.median(per_round_median):.0f} ns/event, p99"
          f" {statistics.median(per_round_p99):.0f} ns (timed one by one; medians over {args.rounds} rounds);"
          f" untimed loop mean {statistics.median(loop_mean):.0f} ns/event")
    last = FeaturePipeline(spec)
    for msg in msgs:
        row = last.update(msg)
    assert np.array_equal(row.view(np.uint64), rows[-1].view(np.uint64)), "the two forms disagree"
    print("the incremental form's last row equals the batch form's, bit for bit")


if __name__ == "__main__":
    main()
