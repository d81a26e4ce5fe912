"""Replay a journal: verify it byte for byte, or backtest it through the simulated venue.

- verify: every recorded input, venue reports included, goes through a fresh kernel built from the
  recorded configuration (or a `--set` variant); what the kernel derives must equal, byte for byte, the
  derived events recorded behind that input. The first difference stops the replay.
- backtest: only the inputs from outside the venue (market data, operators, timers, run markers) go
  through a fresh kernel and a fresh simulated venue, with the trading loop that paper trading uses.
Both start from a fresh kernel built from the recorded configuration (runtime/recovery.py, which also
rebuilds a restarting daemon's kernel).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import Protocol

import msgspec

from foxhunt.config import TradingConfig
from foxhunt.core.kernel import BEHAVIOUR, Kernel
from foxhunt.errors import VerificationFailed
from foxhunt.messages import codec
from foxhunt.messages.base import Input
from foxhunt.messages.scores import ModelScored
from foxhunt.messages.system import RunStarted, VenueConnected, VenueDisconnected, VenueMessageRejected
from foxhunt.ports import JournalStore, JournalWriter, Record, Snapshot
from foxhunt.runtime import snapshots
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.recovery import VenueFactory, build_kernel, refuse_if_ingested
from foxhunt.runtime.scoring import ScoreCheck
from foxhunt.runtime.summary import summarize

# what the recorded venue said, which a backtest's simulated venue says for itself
FROM_VENUE = frozenset(
    t for t in codec.MESSAGE_TYPES
    if t.__name__ in codec.VENUE_REPORT_KINDS or t in (VenueConnected, VenueDisconnected, VenueMessageRejected)
)


def _show(seq: int | str, message: object) -> str:
    return f"  seq {seq}: {msgspec.json.encode(message).decode()}"


class Verifier:
    """Compares, record by record, what a fresh kernel derives with what the journal recorded, and the
    state of the kernel where the journal has a snapshot with the snapshot's (`snapshots`, oldest first)."""

    def __init__(self, name: str, kernel: Kernel, snapshots: Sequence[Snapshot] = (),
                 scores: ScoreCheck | None = None) -> None:
        self.name = name
        self.kernel = kernel
        self.scores = scores  # recomputes the journal's model scores (runtime/scoring.py); None: takes them
        self.events = self.inputs = 0
        self.expected: deque[bytes] = deque()
        self.cause: Record | None = None
        self.snapshots = deque(sorted(snapshots))
        self.snapshots_checked = 0

    def feed(self, page: list[Record]) -> None:
        """One page of records, in order. The loop keeps its state in locals (it runs for every record
        of the journal) and writes it back once per page."""
        handle, encode, expected, cause, scores = self.kernel.handle, codec.encode, self.expected, self.cause, self.scores
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
                    msg = record.message if scores is None else scores.on_input(record.seq, record.message)
                    step = handle(record.seq, msg)
                    if step.derived:
                        expected.extend(encode(e) for e in step.derived)
                elif cause is None or record.causation != cause.seq:
                    raise self._diverged(record, f"seq {record.seq} names input {record.causation} as its cause")
                elif not expected:
                    raise self._diverged(
                        record, f"the journal has derived event seq {record.seq} that replay did not derive"
                    )
                elif scores is not None and type(cause.message) is ModelScored:  # a decision of a model's score
                    if not scores.decision(expected[0], record.payload, codec.decode):
                        raise self._diverged(record, f"derived event seq {record.seq} differs: a decision on a"
                                                     " recomputed score is not the recorded one")
                    expected.popleft()
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


async def verify(store: JournalStore, name: str, trading: TradingConfig,
                 scores: ScoreCheck | None = None, progress: Callable[[int], None] | None = None) -> dict[str, object]:
    """With `scores`, every model score of the journal is recomputed too (ScoreCheck); `progress` hears
    how many events were verified."""
    await refuse_if_ingested(store, name, "verify")
    kept = [snapshot for snapshot in await store.snapshots(name) if snapshots.unusable(snapshot, trading) is None]
    verifier = Verifier(name, build_kernel(trading), kept, scores)
    if scores is not None:
        scores.attach(verifier.kernel, trading)
    started = time.perf_counter()
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        async for page in pages:
            verifier.feed(page)
            if progress is not None:
                progress(verifier.events)
    verifier.finish()
    return summarize(
        verifier.kernel, events=verifier.events, seconds=time.perf_counter() - started, journal=name,
        mode="verify", inputs=verifier.inputs, verified=verifier.events - verifier.inputs,
        snapshots_checked=verifier.snapshots_checked, **(scores.finish() if scores is not None else {}),
    )


class Recompute(Protocol):
    """A backtest's models, answering in line instead of the journal's recorded inputs: the forecasters'
    scores (runtime/scoring.py, Rescore) or an agent's decisions (runtime/policies.py, Redecide).
    `on_input` gives what the backtest takes in place of a recorded input; `after` what the input the loop
    just took set off (an agent's decision at a decision point); `attach` hands it the loop, before the
    first input."""

    def attach(self, loop: TradingLoop) -> None: ...

    def on_input(self, seq: int, msg: Input) -> list[Input]: ...

    def after(self) -> list[Input]: ...


async def backtest(
    store: JournalStore, name: str, trading: TradingConfig, venue_for: VenueFactory, journal: JournalWriter,
    rescore: Recompute | None = None, track: Callable[[Kernel, JournalWriter], JournalWriter] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, object]:
    """Through `venue_for`'s venue (the simulated one), appending what it derives to `journal` (one that
    keeps nothing: a backtest is not a journal's run). The journal's model scores and agents' decisions are
    taken as recorded, or with `rescore` computed again (Recompute). `track` wraps
    the journal to watch what the run journals (a report's tracker, runtime/report.py); `progress` hears
    how many of the journal's events were read."""
    kernel = build_kernel(trading)
    if track is not None:
        journal = track(kernel, journal)
    clock = EventClock()
    venue = venue_for(kernel, trading, clock)
    loop = TradingLoop(kernel, venue, journal)
    if rescore is not None:
        rescore.attach(loop)
    started = time.perf_counter()
    events = 0
    async with aclosing(store.read(name, decode_derived=False)) as pages:
        async for page in pages:
            events += len(page)
            if progress is not None:
                progress(events)
            for record in page:
                msg = record.message
                if record.causation is not None or type(msg) in FROM_VENUE:
                    continue
                clock.advance(msg.ts_init)
                for taken in (msg,) if rescore is None else rescore.on_input(record.seq, msg):
                    rest = loop.take_nowait(taken)
                    if rest is not None:
                        await rest
                    for answer in rescore.after() if rescore is not None else ():
                        await loop.submit(answer)
                if type(msg) is RunStarted:
                    for connected in venue.connect():
                        await loop.submit(connected)
    seconds = time.perf_counter() - started
    return summarize(kernel, events=events, seconds=seconds, journal=name, mode="backtest", inputs=loop.inputs)
