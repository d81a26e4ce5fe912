"""The journal of a backtest: numbers inputs as a journal would and keeps nothing (the inputs are already
in the journal being replayed)."""

from __future__ import annotations

from foxhunt.messages.base import Message
from foxhunt.ports import JournalWriter


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
