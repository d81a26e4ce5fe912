"""What the kernel returns for one input.

Its own module because the kernel is compiled by mypyc (foxhunt/compiled.py), and mypyc drops the
class keywords (frozen=True, gc=False) that make a msgspec Struct what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from foxhunt.messages.base import Derived
from foxhunt.messages.orders import CancelOrder, ReplaceOrder, SubmitOrder


class Step(msgspec.Struct, frozen=True, gc=False):
    """What one input produced: events to journal, and the subset of commands to send to the venue.
    (A Struct, not a NamedTuple: three times faster to build, and every order builds several; `gc=False`:
    it holds two lists of messages, which can never lead back to it.)"""

    derived: Sequence[Derived]
    commands: Sequence[SubmitOrder | CancelOrder | ReplaceOrder]
