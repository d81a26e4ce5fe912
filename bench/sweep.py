"""`foxhunt sweep` against the same points one after another in one process: backtests per minute.

A journal of about 300,000 events (`synthetic:seed=5,n=260000` paper-traded, made once and kept), and 32
points (strategy.ema_cross.fast 4 to 11 times slow 30, 40, 50, 60; more points, more slow values: 70, 80, ...). The same trainable
(bootstrap.BacktestTrainable: a replay backtest, the journal read into memory once per process) runs them
in a loop in this process, before and after the same points through Ray with `--workers` workers (Ray
started inside, as `foxhunt sweep` does; its start timed apart; each point a Ray task: training/sweep.py).
Reported: each side's seconds and backtests per minute, the ratio (target, issue 25: at least 1.7 on this
2-core machine) against the mean of the two sequential runs, with and without Ray's start, and Ray's
overhead per point: the worker-seconds a point took beyond its sequential time, Ray's start left out.

    .venv/bin/python bench/sweep.py [--workers 2] [--points 32]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from foxhunt import bootstrap, config
from foxhunt.training import sweep

JOURNAL = "bench-sweep-300k"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--points", type=int, default=32)
    args = parser.parse_args()
    cfg = config.load(None)
    dsn = bootstrap.resolve_dsn(cfg)

    async def exists() -> bool:
        return JOURNAL in {i.name for i in await (await bootstrap.open_store(cfg, dsn)).list()}

    if not anyio.run(exists):
        subprocess.run([sys.executable, "-m", "foxhunt", "run", "--journal", JOURNAL, "--feed",
                        "synthetic:seed=5,n=260000", "--clock", "feed", "--json"], check=True, capture_output=True)
    slows = ",".join(str(30 + 10 * i) for i in range(max(4, -(-args.points // 8))))  # 30..60 for 32 points
    points = sweep.grid(["strategy.ema_cross.fast=4,5,6,7,8,9,10,11", f"strategy.ema_cross.slow={slows}"])
    points = points[: args.points]
    trainable = bootstrap.BacktestTrainable(cfg, dsn, (JOURNAL,))

    workdir = Path(tempfile.mkdtemp())

    def one_by_one() -> tuple[float, list[dict]]:
        started = time.perf_counter()
        alone = [trainable(p, 1 + i, lambda *_, **__: None, workdir) for i, p in enumerate(points)]
        return time.perf_counter() - started, alone

    before, alone = one_by_one()
    print(f"{len(points)} points over {JOURNAL} (orders at the first point: {alone[0]['orders']})")
    print(f"  one process, one after another: {before:8.1f} s, {60 * len(points) / before:6.2f} backtests/min"
          f" ({before / len(points):.2f} s a point)")

    started = time.perf_counter()
    sweep.start_ray(args.workers, preload=(type(trainable).__module__,))  # as sweep.run starts it
    ray_start = time.perf_counter() - started
    print(f"  Ray's start: {ray_start:.1f} s")
    started = time.perf_counter()
    outcomes = sweep.run(trainable, points, 1, Path(tempfile.mkdtemp()), f"bench-{uuid.uuid4().hex[:8]}", args.workers)
    parallel = time.perf_counter() - started
    assert [o.metrics[f"state_digest.{JOURNAL}"] for o in outcomes] == [a[f"state_digest.{JOURNAL}"] for a in alone]
    print(f"  Ray, {args.workers} workers: {parallel:8.1f} s, {60 * len(points) / parallel:6.2f} backtests/min"
          f" (with the start: {ray_start + parallel:.1f} s)")
    after, _ = one_by_one()  # again, after Ray: the machine's pace drifts, so the anchor is the mean of the two
    sequential = (before + after) / 2
    print(f"  one process again, after Ray: {after:8.1f} s; the anchor, their mean: {sequential:.1f} s")
    overhead = (parallel * args.workers - sequential) / len(points)
    print(f"  ratio {sequential / (ray_start + parallel):.2f} with Ray's start, {sequential / parallel:.2f} without;"
          f" Ray's overhead per point: {overhead:.2f} worker-seconds")


if __name__ == "__main__":
    main()
