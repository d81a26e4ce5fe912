"""What the kernel returns for one input.

Every input's answer is read by the trading loop or an agent's episode, so this module is compiled by mypyc
with them (foxhunt/compiled.py): a native class is built and read in C, where a msgspec Struct's fields are
read through Python's attribute lookup (about 25 ns each, and a step is read three times per input).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, final

from mypy_extensions import mypyc_attr

from foxhunt.messages.base import Derived
from foxhunt.messages.orders import CancelOrder, ReplaceOrder, SubmitOrder


@final
@mypyc_attr(acyclic=True)  # it holds two sequences of messages: never a cycle, so the collector need not track it
class Step:
    """What one input produced: events to journal, and the subset of commands to send to the venue. Read
    only: a step with nothing in it is shared."""

    def __init__(self, derived: Sequence[Derived],
                 commands: Sequence[SubmitOrder | CancelOrder | ReplaceOrder]) -> None:
        self.derived: Final = derived
        self.commands: Final = commands

    def __repr__(self) -> str:
        return f"Step(derived={self.derived!r}, commands={self.commands!r})"
