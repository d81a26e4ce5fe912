"""`foxhunt replay` end to end from PostgreSQL: events per second for --verify and for a backtest.

Records a journal with the paper daemon (synthetic feed, --clock feed) unless it exists, then times
replay.verify (bare, and as the command runs it: every input also shown to the score check, which loads
no model for a journal without scores) and replay.backtest in this process, `--repeats` times each, interleaved with the raw read
path alone (pages fetched and decoded, nothing else) as the reference for how much the kernel costs.
Uses the embedded cluster in FOXHUNT_STATE_DIR (or the DSN in FOXHUNT_DSN).

    .venv/bin/python bench/replay_throughput.py [--events 300000] [--repeats 5]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import subprocess
import sys
import time
from contextlib import aclosing

import anyio

from foxhunt import bootstrap, config
from foxhunt.errors import JournalNotFound
from foxhunt.runtime import replay
from foxhunt.runtime.recovery import trading_config


async def read_only(store, name: str) -> tuple[int, float]:
    started = time.perf_counter()
    n = 0
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        async for page in pages:
            n += len(page)
    return n, time.perf_counter() - started


async def main_async(args) -> None:
    cfg = config.load(None)
    store = await bootstrap.open_store(cfg, bootstrap.resolve_dsn(cfg))
    name = f"bench-replay-{args.events}"
    try:
        await store.info(name)
    except JournalNotFound:
        print(f"recording journal {name}...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "foxhunt", "run", "--journal", name, "--clock", "feed",
                        "--feed", f"synthetic:seed=7,n={args.events}"], check=True, stdout=subprocess.DEVNULL)
    trading = await trading_config(store, name, None, None)
    times: dict[str, list[float]] = {"read+decode only": [], "replay --verify": [],
                                     "replay --verify (the command's: scores checked too)": [],
                                     "replay (backtest)": []}
    events = 0
    for _ in range(args.repeats):
        events, seconds = await read_only(store, name)
        times["read+decode only"].append(seconds)
        times["replay --verify"].append((await replay.verify(store, name, trading))["seconds"])
        times["replay --verify (the command's: scores checked too)"].append(
            (await bootstrap.verify(store, name, trading, cfg))["seconds"])
        times["replay (backtest)"].append((await bootstrap.backtest(store, name, trading))["seconds"])
    print(f"journal {name}: {events} events, {args.repeats} repeats, medians:")
    for label, values in times.items():
        print(f"  {label:20s} {events / statistics.median(values):12,.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=300_000, help="quotes in the recorded feed")
    parser.add_argument("--repeats", type=int, default=5)
    anyio.run(main_async, parser.parse_args(), backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
