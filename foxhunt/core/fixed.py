"""Conversions between configuration decimals and the nanos the core computes with."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.messages.base import parse_fixed


def nanos(value: Decimal) -> int:
    """Exact nanos of a configured Decimal; raises ValueError for more than nine decimal places."""
    return parse_fixed(format(value, "f"))
