"""Base classes of every message, and (re-exported from `fixed_point`) the fixed-point numbers they hold.

Time is an integer count of nanoseconds since the Unix epoch, UTC: `ts_event` when the thing happened
(exchange or feed time), `ts_init` when foxhunt took it in (the runtime's clock; replay reuses the
recorded value).
"""

from __future__ import annotations

import enum
from decimal import Decimal

import msgspec

from foxhunt.messages.fixed_point import SCALE, SCALE_DIGITS, format_fixed, mul, parse_fixed

__all__ = [
    "COUNT_FIELDS", "FIXED_POINT_FIELDS", "REGISTRY", "SCALE", "SCALE_DIGITS", "Derived", "Enum", "Input", "Message",
    "format_fixed", "mul", "nanos",
    "parse_fixed",
]


def nanos(value: Decimal) -> int:
    """Exact nanos of a configured Decimal; raises ValueError for more than nine decimal places."""
    return parse_fixed(format(value, "f"))


class Enum(enum.Enum):
    """The base of foxhunt's enumerations. Members are singletons and compare by identity, so they hash by
    identity too: enum.Enum hashes a member's name in Python, which made a lookup keyed by a member several
    times slower than one keyed by a string (the pre-trade check, docs/benchmarks.md). Like a str's, the hash
    differs from one process to the next: nothing replay must repeat may depend on it."""

    __hash__ = object.__hash__


# The integer fields that hold fixed-point numbers (nanos of a price, a quantity or money) wherever a message
# has them; every other integer field counts something (nanoseconds, sequence numbers, repeats). An export
# writes these as decimals (runtime/export.py); tests/unit/test_export.py checks that every integer field of
# every message is one or the other, so a new field is classified when it is declared.
FIXED_POINT_FIELDS = frozenset({
    "ask", "ask_size", "avg_price", "bid", "bid_size", "cash", "close", "commission", "commissions", "cum_qty",
    "high", "last_price", "last_qty", "leaves_qty", "low", "open", "previous", "price", "quantity", "realized_pnl",
    "size", "target", "trigger_price", "volume",
})
COUNT_FIELDS = frozenset({
    "as_of", "count", "interval_ns", "latency_ns", "operator_uid", "outage_ns", "repeats", "run_id", "seed",
    "since_ns", "step_ns", "ts_event", "ts_init",
})

# Every message type, in the order declared: a class that derives from Input or Derived registers itself
# (a base named with a leading underscore does not), and the codec decodes what is registered here, so a
# new message type is declared once (an input also needs the kernel's handler: tests/unit/test_kernel.py says so)
REGISTRY: list[type[Message]] = []


class Message(msgspec.Struct, frozen=True, kw_only=True, tag=True, tag_field="kind", gc=False):
    """Root of every journaled message. The tag (class name) is the `kind` column of the journal.

    `gc=False` (inherited): messages are frozen and hold only scalars, strings and plain containers of
    them, so they can never be part of a reference cycle; untracked, the millions of them that a run
    allocates no longer trigger and slow down the cyclic garbage collector (measured: a third of the
    trading loop's time, see docs/benchmarks.md)."""

    ts_event: int
    ts_init: int

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__ != __name__ and not cls.__name__.startswith("_"):
            REGISTRY.append(cls)


class Input(Message, frozen=True, kw_only=True):
    """Something that reaches the kernel from outside: market data, venue reports, timers, operators."""


class Derived(Message, frozen=True, kw_only=True):
    """Something the kernel computed from an input; replay must reproduce it byte for byte."""
