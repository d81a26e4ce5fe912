"""Pauses of Python's garbage collector in the live daemon: every collection while it trades, by
generation, with the start-up's heap frozen (foxhunt/heap.py's `started_heap_frozen`, around
runtime/daemon.py's trading) and without.

The run is bench/scoring_loop.py's tick to order on this machine's CPU (the paper daemon on the wall clock,
the memory journal, the ensemble strategy on a tiny MLP, so that torch is loaded as in a daemon that
serves models), `--quotes` quotes at `--rate` a second; a gc callback times each collection. A collection
runs on the event loop's thread: for its duration nothing else does.

    .venv/bin/python bench/gc_pauses.py [--quotes 12000] [--rate 300] [--rounds 2]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import contextlib
import gc
import json
import tempfile
import time
from pathlib import Path

import scoring_loop  # bench/scoring_loop.py

from foxhunt.runtime import daemon


class Pauses:
    """Each collection's generation and duration, while `trading` is set."""

    def __init__(self) -> None:
        self.trading = False
        self.started = 0
        self.seen: dict[int, list[float]] = {0: [], 1: [], 2: []}

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter_ns()
        elif self.trading:
            self.seen[info["generation"]].append((time.perf_counter_ns() - self.started) / 1e3)

    def report(self) -> dict:
        return {f"gen{g}": {"collections": len(v), "max_us": round(max(v), 1) if v else None,
                            "total_ms": round(sum(v) / 1e3, 1)} for g, v in self.seen.items()}


def run(args, store, mid, frozen: bool) -> dict:
    pauses = Pauses()
    real = daemon.started_heap_frozen

    @contextlib.contextmanager
    def trading():
        pauses.trading = True
        try:
            with real() if frozen else contextlib.nullcontext():
                yield
        finally:
            pauses.trading = False

    gc.callbacks.append(pauses)
    daemon.started_heap_frozen = trading
    try:
        result = scoring_loop.tick_to_order(args, store, mid)
    finally:
        daemon.started_heap_frozen = real
        gc.callbacks.remove(pauses)
    return {"frozen": frozen, **pauses.report(), "tick_to_order": result["tick_to_order"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quotes", type=int, default=12_000)
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    loop_args = argparse.Namespace(device="cpu", arch="mlp", size="tiny", window=16, quotes=args.quotes, rate=args.rate,
                                   levels=1_000, compile=False, fuse=False, agent=None)
    with tempfile.TemporaryDirectory() as tmp:
        store, mid = scoring_loop.stored_model(Path(tmp), "mlp", "tiny", 16)
        for _ in range(args.rounds):
            for frozen in (False, True):
                print(json.dumps(run(loop_args, store, mid, frozen)), flush=True)


if __name__ == "__main__":
    main()
