"""Kernel snapshots: a kernel restored from one derives, byte for byte, what the kernel that was never
stopped derived; start-up recovers from the newest usable one and passes over the others, saying why."""

from __future__ import annotations

import hashlib
from contextlib import aclosing

import pytest

from foxhunt import config
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.bootstrap import paper_operations
from foxhunt.errors import VerificationFailed
from foxhunt.runtime import replay, snapshots
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.daemon import RunRequest, run_daemon
from foxhunt.runtime.recovery import build_kernel, recover, trading_config
from tests.integration.test_runtime import FINGERPRINT, synthetic

# every stateful part of the kernel busy: both strategies' windows, VaR scenarios, the drawdown breaker,
# the volatility and market-wide breakers, duplicate-order and message throttles, self-match prevention
RISKY = {
    "FOXHUNT_RISK__MAX_VAR": "100000000", "FOXHUNT_RISK__MAX_EXPECTED_SHORTFALL": "100000000",
    "FOXHUNT_RISK__VAR_SAMPLE_MS": "200", "FOXHUNT_RISK__VAR_WINDOW": "40", "FOXHUNT_RISK__MAX_DRAWDOWN": "100000000",
    "FOXHUNT_RISK__DUPLICATE_WINDOW_MS": "20", "FOXHUNT_RISK__MARKET_INDEX": "EURUSD",
    "FOXHUNT_RISK__MAX_REALIZED_VOL_BPS": "100000", "FOXHUNT_RISK__MAX_GROSS_EXPOSURE": "1000000000",
}


async def records(store, name) -> list:
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        return [r async for page in pages for r in page]


async def paper_journal(env: dict[str, str], n: int = 3000) -> tuple[MemoryJournalStore, config.TradingConfig, list]:
    store, clock = MemoryJournalStore(), EventClock()
    cfg = config.load(None, env=env)
    summary = await run_daemon(store, cfg, RunRequest("j", synthetic(n, clock), clock), FINGERPRINT, paper_operations())
    assert summary["orders"] > 20 and summary["fills"] > 10
    return store, await trading_config(store, "j", None, None), await records(store, "j")


def restored_at(trading, journal: list, cut: int):
    """A kernel fed the journal's inputs up to seq `cut`, then snapshotted and restored."""
    kernel = build_kernel(trading)
    inputs = 0
    for r in journal[:cut]:
        if r.causation is None:
            kernel.handle(r.seq, r.message)
            inputs += 1
    return snapshots.restore(snapshots.take(kernel, cut, inputs, trading))


@pytest.mark.parametrize("strategy", ["ema_cross", "zscore"])
async def test_a_restored_kernel_derives_byte_for_byte_what_the_uninterrupted_one_derived(strategy):
    _, trading, journal = await paper_journal({**RISKY, "FOXHUNT_STRATEGY__NAME": strategy})
    inputs = [r.seq for r in journal if r.causation is None]
    for k in (1, len(inputs) // 5, len(inputs) // 2, len(inputs) - 3):  # cut just before input k
        cut = inputs[k] - 1
        kernel = restored_at(trading, journal, cut)
        verifier = replay.Verifier("j", kernel)
        verifier.feed(journal[cut:])  # raises at the first event that differs
        verifier.finish()
        assert verifier.inputs == len(inputs) - k
    assert kernel.gate.book_var is not None and kernel.gate.book_var.used > 0  # VaR's window was in the state


async def test_a_restored_kernel_that_lost_part_of_its_state_is_caught_by_the_same_check():
    _, trading, journal = await paper_journal(RISKY)
    inputs = [r.seq for r in journal if r.causation is None]
    cut = inputs[len(inputs) // 2] - 1
    kernel = restored_at(trading, journal, cut)
    kernel.strategies[0].state.clear()  # the EMAs forgotten: the strategy warms up again and trades later
    with pytest.raises(VerificationFailed, match="diverged"):
        verifier = replay.Verifier("j", kernel)
        verifier.feed(journal[cut:])
        verifier.finish()


async def test_a_stop_saves_a_snapshot_and_the_next_start_recovers_from_it_feeding_nothing():
    store, clock = MemoryJournalStore(), EventClock()
    cfg = config.load(None, env={**RISKY, "FOXHUNT_JOURNAL__SNAPSHOT_AFTER": "1"})
    for seed in (5, 6, 7):
        await run_daemon(store, cfg, RunRequest("j", synthetic(1500, clock, seed=seed), clock),
                         FINGERPRINT, paper_operations())
    kept = await store.snapshots("j")
    runs = [r.seq for r in await records(store, "j") if type(r.message).__name__ == "RunStarted"]
    last = (await store.info("j")).last_seq
    assert [s.seq for s in kept] == [last, runs[2] - 1, runs[1] - 1]  # each at the end of a run
    trading = await trading_config(store, "j", None, None)
    verified = await replay.verify(store, "j", trading)  # the runs recovered from snapshots verify from seq 1
    assert verified["snapshots_checked"] == 3  # and replay's kernel had each snapshot's state at its seq
    fast = await recover(store, "j", trading, last)
    full = await recover(store, "j", trading, last, use_snapshots=False)
    assert fast.snapshot == kept[0] and fast.inputs == 0 and fast.total_inputs == full.inputs
    assert fast.kernel.state_digest() == full.kernel.state_digest()
    # below [journal] snapshot_after (100,000 by default), neither a start nor a stop takes one
    quiet = MemoryJournalStore()
    for seed in (5, 6):
        await run_daemon(quiet, config.load(None, env=RISKY), RunRequest("j", synthetic(500, clock, seed=seed), clock),
                        FINGERPRINT, paper_operations())
    assert await quiet.snapshots("j") == []


@pytest.mark.faults
async def test_recovery_passes_over_a_snapshot_it_cannot_use_and_says_why():
    store, trading, journal = await paper_journal(RISKY, n=1500)
    last = journal[-1].seq
    good = snapshots.take((await recover(store, "j", trading, last)).kernel, last, 1, trading)
    other = trading.to_json().replace(b'"seed":7', b'"seed":8')
    assert other != trading.to_json()
    bad = [
        good._replace(seq=last - 1, sha256="0" * 64),  # damaged bytes
        good._replace(seq=last - 2, code="someothercode"),
        good._replace(seq=last - 3, kernel="1"),
        good._replace(seq=last - 4, config=other),
        good._replace(seq=last - 5, state=good.state[:-9], sha256=hashlib.sha256(good.state[:-9]).hexdigest()),
    ]
    for snapshot in bad:
        await store.save_snapshot("j", snapshot, keep=10)
    recovery = await recover(store, "j", trading, last)
    assert recovery.snapshot is None and recovery.inputs == sum(r.causation is None for r in journal)
    reasons = "\n".join(recovery.skipped)
    for expected in ("do not match their SHA-256", "other code", "kernel behaviour 1", "another trading configuration",
                     "does not unpickle"):
        assert expected in reasons, reasons
    assert all(reason.count("snapshot at seq") == 1 for reason in recovery.skipped), reasons  # named once
    await store.save_snapshot("j", good, keep=3)  # the newest kept, the oldest two dropped
    assert [s.seq for s in await store.snapshots("j")] == [last, last - 1, last - 2]
    recovery = await recover(store, "j", trading, last)
    assert recovery.snapshot == good and recovery.inputs == 0 and recovery.skipped == []


@pytest.mark.faults
async def test_verify_refuses_a_snapshot_of_a_state_the_journal_does_not_lead_to():
    store, trading, journal = await paper_journal(RISKY, n=1500)
    inputs = [r.seq for r in journal if r.causation is None]
    cut = inputs[len(inputs) // 2] - 1
    honest = snapshots.take(restored_at(trading, journal, cut), cut, 1, trading)
    await store.save_snapshot("j", honest, keep=3)
    assert (await replay.verify(store, "j", trading))["snapshots_checked"] == 1
    await store.save_snapshot("j", honest._replace(state_digest="0" * 16), keep=3)
    with pytest.raises(VerificationFailed, match=f"snapshot at seq {cut} records state 0000000000000000"):
        await replay.verify(store, "j", trading)
    recovery = await recover(store, "j", trading, journal[-1].seq)  # and start-up passes over it
    assert recovery.snapshot is None and "restores another state than it recorded" in recovery.skipped[0]


@pytest.mark.faults
async def test_a_snapshot_moved_to_another_seq_is_refused_by_start_up_and_by_verify():
    """The review's fault: a snapshot row moved 101 inputs later was restored there, and verify passed,
    since neither the restore nor the state digest knew the kernel's own position."""
    store, trading, journal = await paper_journal(RISKY, n=1500)
    inputs = [r.seq for r in journal if r.causation is None]
    cut = inputs[len(inputs) // 3] - 1
    later = inputs[len(inputs) // 3 + 101] - 1
    honest = snapshots.take(restored_at(trading, journal, cut), cut, 1, trading)
    moved = honest._replace(seq=later)
    await store.save_snapshot("j", moved, keep=3)
    recovery = await recover(store, "j", trading, journal[-1].seq)
    assert recovery.snapshot is None
    assert f"snapshot at seq {later}: it holds the kernel as it was after seq " in recovery.skipped[0]
    assert "it is not where it was taken" in recovery.skipped[0]
    with pytest.raises(VerificationFailed, match=f"snapshot at seq {later} records state"):
        await replay.verify(store, "j", trading)


@pytest.mark.faults
@pytest.mark.parametrize("strategy", ["ema_cross", "zscore"])
async def test_the_state_digest_covers_what_decides_strategies_breakers_and_the_pre_trade_engine(strategy):
    """Two kernels fed the same journal agree on the digest; a kernel that differs in any state that decides
    what it does next (a strategy's window, its random generator, a breaker's memory, a throttle's ring)
    does not."""
    _, trading, journal = await paper_journal({**RISKY, "FOXHUNT_STRATEGY__NAME": strategy})
    cut = journal[-1].seq

    def fed():
        kernel = build_kernel(trading)
        for r in journal:
            if r.causation is None:
                kernel.handle(r.seq, r.message)
        return kernel

    same = fed().state_digest()
    assert restored_at(trading, journal, cut).state_digest() == same
    changes = {
        "the strategy's own state": lambda k: (k.strategies[0].state.popitem() if strategy == "ema_cross"
                                                else k.strategies[0].stats.popitem()),
        "its random generator": lambda k: k.contexts[k.strategies[0].strategy_id].rng.random(),
        "a breaker's memory": lambda k: k.safeguards.volatility.returns["EURUSD"].append(0.5),
        "the market-wide breaker": lambda k: setattr(k.safeguards.market_wide, "tripped", 3),
        "a throttle's ring": lambda k: k.gate.record_message(k.gate.flow, k.ts_event + 1),
        "the VaR scenarios": lambda k: k.gate.book_var.returns.__setitem__((0, 0), 0.25),
    }
    for what, change in changes.items():
        kernel = fed()
        change(kernel)
        assert kernel.state_digest() != same, what
