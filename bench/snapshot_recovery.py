"""Start-up recovery: from a kernel snapshot, against feeding the whole journal (the anchor: what start-up
did before snapshots, and still does without a usable one).

A paper run on the in-memory journal records `--quotes` synthetic quotes and what the kernel derived from
them (ema_cross trading, VaR and the breakers on). Then, alternating, `--repeats` times each: the whole
journal's inputs fed through a fresh kernel, and a snapshot taken after the first `--share` of them
restored and the rest fed. Both end in the same state (checked). Also timed: taking the snapshot and
restoring it alone, and its size. The in-memory journal leaves out PostgreSQL's read path, which costs
both sides alike per input read (docs/benchmarks.md, replay read path).

    .venv/bin/python bench/snapshot_recovery.py [--quotes 300000] [--share 0.9] [--repeats 5]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import time

import anyio

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.bootstrap import paper_operations
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime import replay, snapshots
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.daemon import RunRequest, run_daemon

RISK = {"FOXHUNT_RISK__MAX_VAR": "100000000", "FOXHUNT_RISK__VAR_SAMPLE_MS": "1000",
        "FOXHUNT_RISK__MAX_DRAWDOWN": "100000000", "FOXHUNT_RISK__MAX_REALIZED_VOL_BPS": "100000"}


async def main(quotes: int, share: float, repeats: int) -> None:
    cfg = config.load(None, env=RISK)
    store, clock = MemoryJournalStore(), EventClock()
    feed = SyntheticFeed(5, quotes, cfg.trading().build_instruments()["EURUSD"], parse_fixed("1.1"), clock)
    summary = await run_daemon(store, cfg, RunRequest("j", feed, clock), {"bench": "1"}, paper_operations())
    trading = await replay.trading_config(store, "j", None, None)
    last = (await store.info("j")).last_seq
    inputs = [r.seq for r in store._get("j").records if r.causation is None]
    cut = inputs[int(len(inputs) * share)] - 1  # the state after every input before this one
    early = await replay.recover(store, "j", trading, cut, use_snapshots=False)
    taken = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        snapshot = snapshots.take(early.kernel, cut, early.inputs, trading)
        taken[0].append(time.perf_counter() - started)
        started = time.perf_counter()
        snapshots.restore(snapshot)
        taken[1].append(time.perf_counter() - started)
    await store.save_snapshot("j", snapshot, snapshots.KEEP)
    full, fast, digests = [], [], set()
    for _ in range(repeats):
        started = time.perf_counter()
        whole = await replay.recover(store, "j", trading, last, use_snapshots=False)
        full.append(time.perf_counter() - started)
        started = time.perf_counter()
        restored = await replay.recover(store, "j", trading, last)
        fast.append(time.perf_counter() - started)
        assert restored.snapshot is not None and restored.inputs < whole.inputs
        digests |= {whole.kernel.state_digest(), restored.kernel.state_digest()}
    assert len(digests) == 1, "recovery from the snapshot rebuilt another state"
    med = statistics.median
    print(f"compiled: {compiled.compiled_in_use()}; journal: {last:,} events, {len(inputs):,} inputs,"
          f" {summary['orders']:,} orders; snapshot after {early.inputs:,} inputs: {len(snapshot.state):,} bytes")
    print(f"take {med(taken[0]) * 1e3:.1f} ms, restore {med(taken[1]) * 1e3:.1f} ms (medians of {repeats})")
    print(f"recovery, whole journal: {med(full):.3f} s  ({whole.inputs / med(full):,.0f} inputs/s)")
    print(f"recovery, from the snapshot and {restored.inputs:,} inputs after it: {med(fast):.3f} s"
          f"  (ratio {med(fast) / med(full):.3f})")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quotes", type=int, default=300_000)
    p.add_argument("--share", type=float, default=0.9, help="of the inputs the snapshot covers")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    anyio.run(main, a.quotes, a.share, a.repeats, backend_options={"use_uvloop": True})
