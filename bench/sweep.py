"""`foxhunt sweep` against the same points one after another in one process: backtests per minute.

A journal of about 300,000 events (`synthetic:seed=5,n=260000` paper-traded, made once and kept), and 32
points (strategy.ema_cross.fast 4 to 11 times slow 30, 40, 50, 60; more points, more slow values: 70, 80, ...). The same trainable
(bootstrap.BacktestTrainable: a replay backtest, the journal read into memory once per process) runs them
in a loop in this process, before and after the same points through Ray with `--workers` workers (Ray
started inside, as `foxhunt sweep` does; its start timed apart; each point a Ray task: training/sweep.py).
Reported: each side's seconds and backtests per minute, the ratio (target, issue 25: at least 1.7 on this
2-core machine) against the mean of the two sequential runs, with and without Ray's start, and Ray's
overhead per point: the worker-seconds a point took beyond its sequential time, Ray's start left out.

With `--pace`, a point's own pace instead, in the processes a sweep runs it in: the same points (after a first,
warm-up point) in a fresh process each, alternated `--rounds` times, as the main thread's CPU seconds (median)
and their ratio to a plain Python process. Against the plain process: one that first maps as much memory as
Ray's default object store (30% of the machine's memory, all of it mapped by every Ray process) and never
touches it; a Ray task in a worker of a Ray with that default store; and one with the object store a sweep
starts Ray with (sweep.OBJECT_STORE_BYTES).
`--pace --work training`: a tiny CPU training loop instead (an MLP of 32-64-1, Adam, batch 64, 6,000 steps after
200, one thread), the kind of trial `foxhunt tune` runs on a CPU.

    .venv/bin/python bench/sweep.py [--workers 2] [--points 32]
    .venv/bin/python bench/sweep.py --pace [--points 6] [--rounds 3] [--work backtest|training]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import logging
import os
import statistics
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


PACES = ("plain", "mapped, Ray's default", "Ray's default store", "sweep's store")
# The size of Ray's default object store (ray/_private/ray_constants.py: 30% of the machine's memory)
RAY_DEFAULT_STORE = int(0.3 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
# Maps that much, untouched, before anything else is imported (as a Ray worker maps its object store when it
# connects, before the trainable's module), then runs this file with the arguments after it
MAPPED_FIRST = ("import mmap, runpy, sys; untouched = mmap.mmap(-1, int(sys.argv[1])); sys.argv = sys.argv[2:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--points", type=int)
    parser.add_argument("--pace", action="store_true", help="a point's pace in a plain process, in Ray's workers")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", choices=("backtest", "training"), default="backtest")
    parser.add_argument("--pace-in", choices=PACES, help=argparse.SUPPRESS)  # one measurement, in a fresh process
    args = parser.parse_args()
    if args.pace_in is not None:
        print(pace_in(args.pace_in, args.work, args.points))
        return
    if args.pace:
        pace(args.work, args.points or 6, args.rounds)
        return
    args.points = args.points or 32
    cfg = config.load(None)
    dsn = bootstrap.resolve_dsn(cfg)
    make_journal(cfg, dsn)
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
    sweep.start_ray(args.workers, preload=(type(trainable).__module__,),  # as sweep.run starts it
                    object_store_bytes=sweep.OBJECT_STORE_BYTES)
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


def make_journal(cfg: config.Config, dsn: str) -> None:
    """The bench's journal, paper-traded once and kept."""

    async def exists() -> bool:
        return JOURNAL in {i.name for i in await (await bootstrap.open_store(cfg, dsn)).list()}

    if not anyio.run(exists):
        subprocess.run([sys.executable, "-m", "foxhunt", "run", "--journal", JOURNAL, "--feed",
                        "synthetic:seed=5,n=260000", "--clock", "feed", "--json"], check=True, capture_output=True)


def pace(work: str, points: int, rounds: int) -> None:
    """Each of PACES in a fresh process, `rounds` times alternated: the work's CPU seconds, median and ratio."""
    if work == "backtest":
        cfg = config.load(None)
        make_journal(cfg, bootstrap.resolve_dsn(cfg))
    seconds: dict[str, list[float]] = {where: [] for where in PACES}
    for _ in range(rounds):
        for where in PACES:
            command = [sys.executable, __file__, "--pace-in", where, "--work", work, "--points", str(points)]
            if where == "mapped, Ray's default":
                command[1:1] = ["-c", MAPPED_FIRST, str(RAY_DEFAULT_STORE)]
            run = subprocess.run(command, check=True, capture_output=True, text=True)
            seconds[where].append(float(run.stdout.split()[-1]))
    plain = statistics.median(seconds["plain"])
    what = f"{points} points over {JOURNAL} after a first one" if work == "backtest" else "a tiny training loop"
    print(f"{what}, the main thread's CPU seconds, {rounds} rounds:")
    for where, runs in seconds.items():
        print(f"  {where:22} {statistics.median(runs):6.2f} s (runs {', '.join(f'{r:.2f}' for r in runs)})"
              f"  ratio {statistics.median(runs) / plain:.3f}")


def pace_in(where: str, work: str, points: int) -> float:
    """The CPU seconds of the main thread doing `work` (`points` points after a first, warm-up one, or the
    training loop) `where`."""
    run = _points if work == "backtest" else _training
    if where in ("plain", "mapped, Ray's default"):  # the second mapped before this file ran (pace)
        return run(points)
    import ray

    store = sweep.OBJECT_STORE_BYTES if where == "sweep's store" else None
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             object_store_memory=store)
    return ray.get(ray.remote(run).remote(points))


def _training(_: int) -> float:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    adam = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(64, 32), torch.randn(64, 1)

    def steps(n: int) -> None:
        for _ in range(n):
            adam.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            adam.step()

    steps(200)
    started = time.thread_time()
    steps(6000)
    return round(time.thread_time() - started, 3)


def _points(points: int) -> float:
    cfg = config.load(None)
    trainable = bootstrap.BacktestTrainable(cfg, bootstrap.resolve_dsn(cfg), (JOURNAL,))
    chosen = sweep.grid([f"strategy.ema_cross.fast={','.join(str(4 + i) for i in range(points + 1))}",
                         "strategy.ema_cross.slow=30"])
    workdir = Path(tempfile.mkdtemp())
    trainable(chosen[0], 1, lambda *_, **__: None, workdir)  # reads the journal; warms up
    started = time.thread_time()
    for overrides in chosen[1:]:
        trainable(overrides, 1, lambda *_, **__: None, workdir)
    return round(time.thread_time() - started, 3)


if __name__ == "__main__":
    main()
