"""Rebuild a journal's kernel: from the configuration its first record holds, then from its newest usable
snapshot (runtime/snapshots.py) and the inputs after it. A daemon restarting on a journal does this at
start-up (`recover`), and `foxhunt journal snapshot` to take a snapshot (`snapshot`); replay builds its
fresh kernel here too (`build_kernel`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass

from foxhunt.config import TradingConfig, trading_from_json
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.strategies import build_strategy
from foxhunt.errors import ConfigError, JournalArchived, JournalMismatch
from foxhunt.messages.system import RunStarted
from foxhunt.ports import Clock, JournalStore, Snapshot, Venue
from foxhunt.runtime import snapshots

# how a run gets its venue, once its kernel is built (the composition root chooses: bootstrap.py)
VenueFactory = Callable[[Kernel, TradingConfig, Clock], Venue]


def build_kernel(trading: TradingConfig) -> Kernel:
    instruments = trading.build_instruments()
    try:
        gate = PreTradeGate(trading.risk, instruments)
    except ValueError as e:
        raise ConfigError(f"[risk]: {e}") from e
    return Kernel(instruments, [build_strategy(trading.strategy)], gate)


async def recorded_config(store: JournalStore, name: str) -> RunStarted:
    """The journal's first record, which every run writes first."""
    async with aclosing(store.read(name, 1, 1)) as pages:
        async for (record,) in pages:
            if isinstance(record.message, RunStarted):
                return record.message
            raise JournalMismatch(f"journal {name!r} does not start with RunStarted (found {type(record.message).__name__})")
    raise JournalMismatch(f"journal {name!r} is empty")


async def trading_config(store: JournalStore, name: str, sets: list[str] | None, override: TradingConfig | None):
    if override is not None:
        return override if not sets else trading_from_json(override.to_json(), sets)
    started = await recorded_config(store, name)
    return trading_from_json(started.config, sets)


async def refuse_if_ingested(store: JournalStore, name: str, doing: str) -> RunStarted:
    """The journal's first record, unless it holds ingested market data only."""
    started = await recorded_config(store, name)
    if started.recorded_by == "ingest":
        raise JournalMismatch(
            f"journal {name!r} holds ingested market data that was never traded: nothing to {doing};"
            f" backtest it with `foxhunt replay {name}`"
        )
    return started


@dataclass
class Recovery:
    """A journal's kernel rebuilt at start-up, and how."""

    kernel: Kernel
    inputs: int  # inputs fed through the kernel: those after the snapshot, when one was used
    snapshot: Snapshot | None  # the snapshot it started from
    skipped: list[str]  # the snapshots it could not start from, and why

    @property
    def total_inputs(self) -> int:
        return self.inputs + (self.snapshot.inputs if self.snapshot is not None else 0)


async def recover(
    store: JournalStore, name: str, built_with: TradingConfig, upto: int, *, use_snapshots: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Recovery:
    """The kernel of journal `name` after its inputs up to `upto`: restored from the newest snapshot that
    can stand in for the inputs it holds (runtime/snapshots.py), then fed the inputs after it. `progress`
    hears the sequence number reached, page by page."""
    kernel, used, skipped = await from_snapshot(store, name, built_with, upto) if use_snapshots else (None, None, [])
    after = used.seq if used is not None else 0
    kernel = kernel or build_kernel(built_with)
    inputs = 0
    if upto <= after:
        return Recovery(kernel, inputs, used, skipped)
    try:
        async with aclosing(store.read(name, after + 1, upto - after, decode_derived=False)) as pages:
            async for page in pages:
                for record in page:
                    if record.causation is None:
                        kernel.handle(record.seq, record.message)
                        inputs += 1
                if progress is not None and page:
                    progress(page[-1].seq)
    except JournalArchived as e:
        why = "; ".join(skipped) or f"there is none (take one before archiving: `foxhunt journal snapshot {name}`)"
        raise JournalArchived(f"{e}; start-up needs them or a usable snapshot after them, and {why}") from e
    return Recovery(kernel, inputs, used, skipped)


async def from_snapshot(store: JournalStore, name: str, built_with: TradingConfig,
                        upto: int) -> tuple[Kernel | None, Snapshot | None, list[str]]:
    """The kernel of the newest snapshot at or before `upto` that can stand in for the inputs it holds, and
    that snapshot, or (None, None) where none can; with the snapshots passed over, and why."""
    skipped = []
    for snapshot in (await store.snapshots(name)) if upto else ():
        why = "beyond the journal's end" if snapshot.seq > upto else snapshots.unusable(snapshot, built_with)
        if why is None:
            try:
                kernel = snapshots.restore(snapshot)
                await _in_place(store, name, kernel, snapshot)
                return kernel, snapshot, skipped
            except snapshots.SnapshotDamaged as e:
                why = str(e)
        skipped.append(f"snapshot at seq {snapshot.seq}: {why}")
    return None, None, skipped


async def _in_place(store: JournalStore, name: str, kernel: Kernel, snapshot: Snapshot) -> None:
    """A snapshot stands after the input its kernel handled last and that input's derived events: an input
    between them means the row was moved to a later seq, and restored there the kernel would skip it.
    Where the journal's records up to the snapshot are archived, this cannot be checked here (verify does,
    against the archive restored)."""
    if kernel.seq == snapshot.seq:
        return
    try:
        async with aclosing(store.read(name, kernel.seq + 1, snapshot.seq - kernel.seq, decode_derived=False)) as pages:
            async for page in pages:
                for record in page:
                    if record.causation is None:
                        raise snapshots.SnapshotDamaged(
                            f"it holds the kernel as it was after seq {kernel.seq}, and input seq {record.seq} lies"
                            f" between: it is not where it was taken")
    except JournalArchived:
        return


async def snapshot(store: JournalStore, name: str, built_with: TradingConfig,
                   progress: Callable[[int], None] | None = None) -> tuple[Snapshot, Recovery]:
    """`foxhunt journal snapshot`: the kernel after the journal's last committed input, stored (from the
    newest usable snapshot and the inputs after it, so a regular snapshot costs only what came since)."""
    upto = (await store.info(name)).last_seq
    recovery = await recover(store, name, built_with, upto, progress=progress)
    taken = snapshots.take(recovery.kernel, upto, recovery.total_inputs, built_with)
    await store.save_snapshot(name, taken, snapshots.KEEP)
    return taken, recovery
