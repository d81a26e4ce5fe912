"""Replay a journal: verify it byte for byte, backtest it through the simulated venue, or rebuild state.

- verify: every recorded input, venue reports included, goes through a fresh kernel built from the
  recorded configuration (or a `--set` variant); what the kernel derives must equal, byte for byte, the
  derived events recorded behind that input. The first difference stops the replay.
- backtest: only the inputs from outside the venue (market data, operators, timers, run markers) go
  through a fresh kernel and a fresh simulated venue, with the trading loop that paper trading uses.
- recover: a daemon restarting on a journal rebuilds its kernel: from the newest usable snapshot
  (runtime/snapshots.py), then the inputs after it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass

import msgspec

from foxhunt.adapters.journal_discard import DiscardingJournal
from foxhunt.adapters.venue_sim import SimVenue
from foxhunt.config import TradingConfig, trading_from_json
from foxhunt.core.kernel import BEHAVIOUR, Kernel
from foxhunt.core.risk import PreTradeRisk
from foxhunt.core.strategies import build_strategy
from foxhunt.errors import ConfigError, JournalArchived, JournalMismatch, VerificationFailed
from foxhunt.messages import codec
from foxhunt.messages.system import RunStarted, VenueConnected, VenueDisconnected, VenueMessageRejected
from foxhunt.ports import JournalStore, Record, Snapshot
from foxhunt.runtime import snapshots
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.summary import summarize

# what the recorded venue said, which a backtest's simulated venue says for itself
FROM_VENUE = frozenset(
    t for t in codec.MESSAGE_TYPES
    if t.__name__ in codec.VENUE_REPORT_KINDS or t in (VenueConnected, VenueDisconnected, VenueMessageRejected)
)


def build_kernel(trading: TradingConfig) -> Kernel:
    instruments = trading.build_instruments()
    try:
        gate = PreTradeRisk(trading.risk, instruments)
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


def _show(seq: int | str, message: object) -> str:
    return f"  seq {seq}: {msgspec.json.encode(message).decode()}"


class Verifier:
    """Compares, record by record, what a fresh kernel derives with what the journal recorded, and the
    state of the kernel where the journal has a snapshot with the snapshot's (`snapshots`, oldest first)."""

    def __init__(self, name: str, kernel: Kernel, snapshots: Sequence[Snapshot] = ()) -> None:
        self.name = name
        self.kernel = kernel
        self.events = self.inputs = 0
        self.expected: deque[bytes] = deque()
        self.cause: Record | None = None
        self.snapshots = deque(sorted(snapshots))
        self.snapshots_checked = 0

    def feed(self, page: list[Record]) -> None:
        """One page of records, in order. The loop keeps its state in locals (it runs for every record
        of the journal) and writes it back once per page."""
        handle, encode, expected, cause = self.kernel.handle, codec.encode, self.expected, self.cause
        check_before = self.snapshots[0].seq + 1 if self.snapshots else None
        inputs = 0
        try:
            for record in page:
                if record.causation is None:
                    if expected:
                        raise self._diverged(None, f"replay derived more events before input seq {record.seq}")
                    if check_before is not None and record.seq >= check_before:
                        self._check_snapshots(record.seq)
                        check_before = self.snapshots[0].seq + 1 if self.snapshots else None
                    self.cause = cause = record
                    inputs += 1
                    step = handle(record.seq, record.message)
                    if step.derived:
                        expected.extend(encode(e) for e in step.derived)
                elif cause is None or record.causation != cause.seq:
                    raise self._diverged(record, f"seq {record.seq} names input {record.causation} as its cause")
                elif not expected:
                    raise self._diverged(
                        record, f"the journal has derived event seq {record.seq} that replay did not derive"
                    )
                elif expected[0] != record.payload:
                    raise self._diverged(record, f"derived event seq {record.seq} differs")
                else:
                    expected.popleft()
        finally:
            self.events += len(page)
            self.inputs += inputs

    def finish(self) -> None:
        if self.expected:
            raise self._diverged(None, "replay derived more events at the end of the journal")
        self._check_snapshots(None)

    def _check_snapshots(self, before_seq: int | None) -> None:
        """The snapshots of the state after the inputs before `before_seq` (None: all of the journal)."""
        while self.snapshots and (before_seq is None or self.snapshots[0].seq < before_seq):
            snapshot = self.snapshots.popleft()
            digest = self.kernel.state_digest()
            if digest != snapshot.state_digest:
                raise VerificationFailed(
                    f"replay of journal {self.name!r}: its snapshot at seq {snapshot.seq} records state"
                    f" {snapshot.state_digest}, but replay's kernel there is in state {digest}: start-up would"
                    " restore a state the journal does not lead to, so delete that snapshot"
                )
            self.snapshots_checked += 1

    def _diverged(self, recorded: Record | None, what: str) -> VerificationFailed:
        lines = [f"replay of journal {self.name!r} diverged: {what}"]
        if self.cause is not None:
            lines.append(f"caused by input seq {self.cause.seq} ({type(self.cause.message).__name__})")
        where = self.kernel.run.fingerprint if self.kernel.run is not None else {"kernel": str(BEHAVIOUR)}
        if where.get("kernel", "1") != str(BEHAVIOUR):  # journals from before it was recorded: 1
            version = f" (foxhunt {where['foxhunt']})" if "foxhunt" in where else ""
            lines.append(
                f"the run was recorded by kernel behaviour {where.get('kernel', '1')}{version}; this foxhunt's"
                f" kernel is behaviour {BEHAVIOUR}, which derives other events from some inputs"
                " (foxhunt/core/kernel.py, BEHAVIOUR): verify the journal with the foxhunt that recorded it"
            )
        lines.append("recorded:" if recorded else "recorded: nothing")
        if recorded:
            lines.append(_show(recorded.seq, codec.decode(recorded.payload)))
        lines.append("replayed:" if self.expected else "replayed: nothing")
        if self.expected:
            lines.append(_show("-", codec.decode(self.expected[0])))
        return VerificationFailed("\n".join(lines))


async def verify(store: JournalStore, name: str, trading: TradingConfig) -> dict[str, object]:
    await refuse_if_ingested(store, name, "verify")
    kept = [snapshot for snapshot in await store.snapshots(name) if snapshots.unusable(snapshot, trading) is None]
    verifier = Verifier(name, build_kernel(trading), kept)
    started = time.perf_counter()
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        async for page in pages:
            verifier.feed(page)
    verifier.finish()
    return summarize(
        verifier.kernel, events=verifier.events, seconds=time.perf_counter() - started, journal=name,
        mode="verify", inputs=verifier.inputs, verified=verifier.events - verifier.inputs,
        snapshots_checked=verifier.snapshots_checked,
    )


async def backtest(store: JournalStore, name: str, trading: TradingConfig) -> dict[str, object]:
    kernel = build_kernel(trading)
    clock = EventClock()
    venue = SimVenue(kernel.instruments, trading.venue, clock)
    loop = TradingLoop(kernel, venue, DiscardingJournal())
    started = time.perf_counter()
    events = 0
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        async for page in pages:
            events += len(page)
            for record in page:
                msg = record.message
                if record.causation is not None or type(msg) in FROM_VENUE:
                    continue
                clock.advance(msg.ts_init)
                rest = loop.take_nowait(msg)
                if rest is not None:
                    await rest
                if type(msg) is RunStarted:
                    for connected in venue.connect():
                        await loop.submit(connected)
    seconds = time.perf_counter() - started
    return summarize(kernel, events=events, seconds=seconds, journal=name, mode="backtest", inputs=loop.inputs)


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
    store: JournalStore, name: str, built_with: TradingConfig, upto: int, *, use_snapshots: bool = True
) -> Recovery:
    """The kernel of journal `name` after its inputs up to `upto`: restored from the newest snapshot that
    can stand in for the inputs it holds (runtime/snapshots.py), then fed the inputs after it."""
    kernel, after, used, skipped = None, 0, None, []
    for snapshot in (await store.snapshots(name)) if use_snapshots and upto else ():
        why = "beyond the journal's end" if snapshot.seq > upto else snapshots.unusable(snapshot, built_with)
        if why is None:
            try:
                kernel, after, used = snapshots.restore(snapshot), snapshot.seq, snapshot
                await _in_place(store, name, kernel, snapshot)
                break
            except snapshots.SnapshotDamaged as e:
                kernel, after, used, why = None, 0, None, str(e)
        skipped.append(f"snapshot at seq {snapshot.seq}: {why}")
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
    except JournalArchived as e:
        why = "; ".join(skipped) or f"there is none (take one before archiving: `foxhunt journal snapshot {name}`)"
        raise JournalArchived(f"{e}; start-up needs them or a usable snapshot after them, and {why}") from e
    return Recovery(kernel, inputs, used, skipped)


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


async def snapshot(store: JournalStore, name: str, built_with: TradingConfig) -> tuple[Snapshot, Recovery]:
    """`foxhunt journal snapshot`: the kernel after the journal's last committed input, stored (from the
    newest usable snapshot and the inputs after it, so a regular snapshot costs only what came since)."""
    upto = (await store.info(name)).last_seq
    recovery = await recover(store, name, built_with, upto)
    taken = snapshots.take(recovery.kernel, upto, recovery.total_inputs, built_with)
    await store.save_snapshot(name, taken, snapshots.KEEP)
    return taken, recovery
