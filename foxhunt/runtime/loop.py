"""The trading loop: inputs through the kernel into the journal, approved commands out to the venue.

Paper trading and backtest replay run this same loop; only the journal (PostgreSQL, or none) and the
source of inputs differ. For each input: journal it (the journal assigns its sequence number), let the
kernel handle it, journal what it derived right behind it, then hand the approved commands to the venue:
with durability `before_send`, only once the journal has made everything durable. The venue's answers
are new inputs and go round the same way, in order, until nothing is left.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, cast

import anyio

from foxhunt.core.kernel import Kernel
from foxhunt.core.step import Step
from foxhunt.messages.base import Derived, Input
from foxhunt.messages.market import MARKET_DATA_TYPES, MarketData
from foxhunt.messages.orders import CancelOrder, ReplaceOrder, SubmitOrder
from foxhunt.ports import JournalWriter, Venue


class Observer(Protocol):
    """What watches the loop for telemetry (observability/telemetry.py)."""

    def on_step(self, msg: Input, derived: Sequence[Derived]) -> None: ...

    def on_commit_wait(self, order_ids: list[str], started_ns: int, ended_ns: int) -> None: ...

    def on_send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder, received_ns: int, sent_ns: int) -> None: ...


class TradingLoop:
    def __init__(
        self,
        kernel: Kernel,
        venue: Venue,
        journal: JournalWriter,
        durability: Literal["before_send", "async"] = "before_send",
    ) -> None:
        self.kernel = kernel
        self.venue = venue
        self.journal = journal
        self.before_send = durability == "before_send"
        self.inputs = 0
        self.derived = 0
        # called about once a second while the loop waits for the journal (to show systemd's watchdog
        # that a wait, not a hang, holds it up); None: wait without waking
        self.on_wait: Callable[[], None] | None = None
        self.observer: Observer | None = None  # telemetry; None: off, at no cost
        # hears of every market data input once journaled and handled, with its sequence number (the
        # scoring source's features: runtime/scoring.py); None: nobody
        self.on_market: Callable[[int, MarketData], None] | None = None

    async def take(self, msg: Input) -> None:
        """One input from a source: market data goes through `market_nowait`, anything else through
        `submit`."""
        rest = self.take_nowait(msg)
        if rest is not None:
            await rest

    def take_nowait(self, msg: Input) -> Awaitable[object] | None:
        """`take` without a coroutine of its own for the input that needs none (most market data): None
        when it is handled; otherwise what is left, which the caller must await. The daemon and replay
        call this for every input."""
        if type(msg) in MARKET_DATA_TYPES:
            return self.market_nowait(cast(MarketData, msg))
        return self.submit(msg)

    def market_nowait(self, msg: MarketData) -> Awaitable[None] | None:
        """Market data: the kernel sees it, then the venue matches its resting orders against it, then
        the commands the kernel decided are sent (so they meet the book this data describes). The common
        tick waits for nothing, commands nothing and brings no venue report: it is handled when this
        returns None, without a coroutine of its own. Otherwise what is left (back-pressure, sends, the
        venue's reports) is returned, and the caller must await it."""
        if self.journal.backlogged:
            return self._market_after_relief(msg)
        return self._market_now(msg)

    async def _market_after_relief(self, msg: MarketData) -> None:
        # relieve() returns once the writer has taken its turn; the queue may still hold more than a batch
        # (short of its limit), and the input is taken all the same
        await self._wait(self.journal.relieve)
        rest = self._market_now(msg)
        if rest is not None:
            await rest

    def _market_now(self, msg: MarketData) -> Awaitable[None] | None:
        journal = self.journal
        # _handle, inlined: this runs for every tick of every backtest
        seq = journal.append(msg)
        step = self.kernel.handle(seq, msg)
        self.inputs += 1
        if self.on_market is not None:
            self.on_market(seq, msg)
        commands = step.commands
        if step.derived:
            self.derived += len(step.derived)
            for event in step.derived:
                journal.append(event, seq)
            if self.observer is not None:
                self.observer.on_step(msg, step.derived)
        reports = self.venue.on_market(msg)
        if commands or reports:
            return self._send_and_drain(commands, deque(reports))
        return None

    async def _send_and_drain(self, commands, pending: deque[Input]) -> None:
        if commands:
            await self._send(commands, pending)
        await self._drain(pending)

    async def submit(self, msg: Input) -> tuple[int, Sequence[Derived]]:
        """Any other input (system events, venue reports, timers, operators): its sequence number and
        what it derived, once it and everything it set off are handled."""
        if self.journal.backlogged:
            await self._wait(self.journal.relieve)
        seq, step = self._handle(msg)
        pending: deque[Input] = deque()
        if step.commands:
            await self._send(step.commands, pending)
            await self._drain(pending)
        return seq, step.derived

    async def _drain(self, pending: deque[Input]) -> None:
        while pending:
            if self.journal.backlogged:
                await self._wait(self.journal.relieve)
            commands = self._handle(pending.popleft())[1].commands
            if commands:
                await self._send(commands, pending)

    def _handle(self, msg: Input) -> tuple[int, Step]:
        journal = self.journal
        seq = journal.append(msg)
        step = self.kernel.handle(seq, msg)
        self.inputs += 1
        if step.derived:
            self.derived += len(step.derived)
            for event in step.derived:
                journal.append(event, seq)
        if self.observer is not None:
            self.observer.on_step(msg, step.derived)
        return seq, step

    async def _wait(self, wait: Callable[[], Awaitable[None]]) -> None:
        if self.on_wait is None:
            return await wait()
        while True:
            with anyio.move_on_after(1.0) as scope:
                await wait()  # relieve() and flush() wait on events: safe to interrupt and call again
            if not scope.cancelled_caught:
                return
            self.on_wait()

    async def _send(self, commands, pending: deque[Input]) -> None:
        observer = self.observer
        if self.before_send and self.journal.committed_seq < self.journal.last_seq:
            started = time.time_ns() if observer is not None else 0
            await self._wait(self.journal.flush)
            if observer is not None:
                orders = [c.order_id for c in commands if type(c) is SubmitOrder]
                observer.on_commit_wait(orders, started, time.time_ns())
        for cmd in commands:
            if observer is None:
                pending.extend(self.venue.send(cmd))
            else:  # the observer hears of it after the venue has it: it never delays a send
                sent = time.time_ns()
                pending.extend(self.venue.send(cmd))
                observer.on_send(cmd, cmd.ts_init, sent)
