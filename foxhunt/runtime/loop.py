"""The trading loop: inputs through the kernel into the journal, approved commands out to the venue.

Paper trading and backtest replay run this same loop; only the journal (PostgreSQL, or none) and the
source of inputs differ. For each input: journal it (the journal assigns its sequence number), let the
kernel handle it, journal what it derived right behind it, then hand the approved commands to the venue:
with durability `before_send`, only once the journal has made everything durable. The venue's answers
are new inputs and go round the same way, in order, until nothing is left.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from foxhunt.core.kernel import Kernel
from foxhunt.messages.base import Input, Message
from foxhunt.messages.market import MARKET_DATA_TYPES
from foxhunt.ports import JournalWriter, Venue


class DiscardingJournal(JournalWriter):
    """For backtests: numbers inputs like a journal would, keeps nothing."""

    name = "(backtest)"

    def __init__(self) -> None:
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    def append(self, message: Message, causation: int | None = None) -> int:
        self._seq += 1
        return self._seq

    async def flush(self) -> None:
        pass


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

    async def take(self, msg: Input) -> None:
        """One input from a source: market data goes through `market`, anything else through `submit`."""
        if type(msg) in MARKET_DATA_TYPES:
            await self.market(msg)
        else:
            await self.submit(msg)

    async def market(self, msg: Input) -> None:
        """Market data: the kernel sees it, then the venue matches its resting orders against it, then
        the commands the kernel decided are sent (so they meet the book this data describes)."""
        journal = self.journal
        if journal.backlogged:
            await journal.relieve()
        # _handle, inlined: this runs for every tick of every backtest
        seq = journal.append(msg)
        step = self.kernel.handle(seq, msg)
        self.inputs += 1
        commands = step.commands
        if step.derived:
            self.derived += len(step.derived)
            for event in step.derived:
                journal.append(event, seq)
        reports = self.venue.on_market(msg)
        if commands or reports:
            pending = deque(reports)
            await self._send(commands, pending)
            await self._drain(pending)

    async def submit(self, msg: Input) -> None:
        """Any other input (system events, venue reports, timers, operators)."""
        await self._drain(deque((msg,)))

    async def _drain(self, pending: deque[Input]) -> None:
        while pending:
            if self.journal.backlogged:
                await self.journal.relieve()
            await self._send(self._handle(pending.popleft()), pending)

    def _handle(self, msg: Input):
        journal = self.journal
        seq = journal.append(msg)
        step = self.kernel.handle(seq, msg)
        self.inputs += 1
        if step.derived:
            self.derived += len(step.derived)
            for event in step.derived:
                journal.append(event, seq)
        return step.commands

    async def _send(self, commands, pending: deque[Input]) -> None:
        if not commands:
            return
        if self.before_send:
            await self.journal.flush()
        for cmd in commands:
            pending.extend(self.venue.send(cmd))
