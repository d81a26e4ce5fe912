"""The fixed-point number representation shared by every message: nanos, and their decimal text.

Prices, quantities and money are integers counting units of 10**-9 ("nanos"). Binary floating point
cannot represent 0.1 exactly and sums of floats depend on the order of addition; integers do neither, so
a position folded from ten thousand fills is exact and identical in live and replay. Nine decimal places
cover every tick size foxhunt trades (FX pips are 10**-5, JPY crosses 10**-3) and int64 still holds
9.2 billion units, which is more than any single price or quantity we handle. Products (price times
quantity) are computed with Python's unbounded integers and scaled back with floor division, so money
rounds toward minus infinity at 10**-9 and never overflows.

A module of its own, free of msgspec's classes, so that mypyc compiles it with the hot path
(`compiled.MODULES`): feeds parse two to four prices a row, the FIX and IB venues a few a report.
`foxhunt.messages.base` re-exports all of it.
"""

from __future__ import annotations

import operator
from typing import Final

from mypy_extensions import i64

SCALE: Final = 1_000_000_000
SCALE_DIGITS: Final = 9
INT64_MAX: Final = 2**63 - 1  # what the risk engine's arrays hold: 9.2 billion units in nanos
EXACT: Final = 2**53  # every int of at most this size is a double exactly (9 million units in nanos)
# where `mul`, `div` and `times` run in machine words, compiled: operands below 2**31 units, and for `mul`
# the product of their whole parts below 2**32, for `times` their product's double below 2**62
_WORDS: Final = 2**31 * SCALE
_HIGH: Final = 2**32
_DIVISOR: Final = 2**63 // 1000  # `div`'s divisor: its remainders times 1000 stay inside int64
_QUOTIENT: Final = 2**33  # and its whole quotient: times SCALE, below 8.6e18
_FITS: Final = 4.611686018427387904e18  # 2**62


def within_int64(nanos: int, what: str) -> int:
    """`nanos`, if the risk engine's int64 arrays can hold it; else ValueError naming `what` (a venue's
    report of a quantity or price no instrument has, say 1e308, must be refused at the edge)."""
    if -INT64_MAX <= nanos <= INT64_MAX:
        return nanos
    raise ValueError(f"{what}: {format_fixed(nanos)} is beyond what foxhunt holds (9.2 billion units)")


def parse_fixed(text: str) -> int:
    """Parse a decimal string such as '1.10345' or '-0.5' into nanos, exactly (no float on the way).

    Raises ValueError naming the text for anything that is not a plain finite decimal with at most
    nine fractional digits.
    """
    # Fast path for what market data files hold (digits, a dot, at most nine digits): feed parsing and
    # ingest call this twice or four times a row.
    whole, _, frac = text.partition(".")
    if whole.isdecimal() and len(frac) <= SCALE_DIGITS and (frac.isdecimal() or not frac):
        return int(whole + frac.ljust(SCALE_DIGITS, "0"))
    return _parse_fixed_general(text)


def _parse_fixed_general(text: str) -> int:
    s = text.strip()
    neg = s.startswith("-")
    if neg or s.startswith("+"):
        s = s[1:]
    whole, _, frac = s.partition(".")
    if not (whole or frac) or not (whole.isdigit() or whole == "") or not (frac.isdigit() or frac == ""):
        raise ValueError(f"not a decimal number: {text!r}")
    if len(frac) > SCALE_DIGITS:
        if frac[SCALE_DIGITS:].strip("0"):
            raise ValueError(f"more than {SCALE_DIGITS} decimal places: {text!r}")
        frac = frac[:SCALE_DIGITS]
    value = int(whole or "0") * SCALE + int(frac.ljust(SCALE_DIGITS, "0") or "0")
    return -value if neg else value


def format_fixed(value: int) -> str:
    """Render nanos as the shortest exact decimal string: 1103450000 -> '1.10345'."""
    sign = "-" if value < 0 else ""
    whole, frac = divmod(abs(value), SCALE)
    frac_text = f"{frac:09d}".rstrip("0")
    return f"{sign}{whole}.{frac_text}" if frac_text else f"{sign}{whole}"


def mul(a: int, b: int) -> int:
    """Product of two fixed-point numbers, in nanos, rounded toward minus infinity: `a * b // SCALE`,
    exactly. Compiled, it runs in machine words wherever both lie within 2**31 units and the product of
    their whole units within 2**32 (4.3 billion: an order's value in any currency foxhunt trades); the rest
    through Python's integers, as before.

    In words: with a = ah * SCALE + al and b = bh * SCALE + bl (floor division, so 0 <= al, bl < SCALE),
    a * b // SCALE = ah * bh * SCALE + ah * bl + al * bh + al * bl // SCALE exactly, since the first three
    terms are integers. |ah|, |bh| <= 2**31, so ah * bh fits; where |ah * bh| < 2**32, every partial sum
    stays below 2**32 * SCALE + 2 * 2**31 * SCALE + SCALE (8.6e18), inside int64 (9.2e18). mypyc's own fast
    path for `int` takes operands in [0, 2**30) only: a price or quantity of 1.07 units or more, or below
    zero, went through Python's integers, both boxed."""
    if -_WORDS < a < _WORDS and -_WORDS < b < _WORDS:
        x: i64 = a
        y: i64 = b
        xh = x // SCALE
        yh = y // SCALE
        high = xh * yh
        if -_HIGH < high < _HIGH:
            xl = x - xh * SCALE
            yl = y - yh * SCALE
            return high * SCALE + xh * yl + xl * yh + xl * yl // SCALE
    return a * b // SCALE


def div(a: int, b: int) -> int:
    """Quotient of two fixed-point numbers, in nanos, rounded toward minus infinity: `a * SCALE // b`,
    exactly (ZeroDivisionError for b == 0). Compiled, it runs in machine words wherever |b| is below 9.2
    million units and the quotient within 8.5 billion units (an average price of any position foxhunt
    holds); the rest through Python's integers.

    In words: long division in int64, SCALE's nine digits three at a time. a = q * b + r with r of b's sign
    and |r| < |b| (floor division), and r * 1000 stays inside int64 while |b| < 2**63 / 1000; each step's
    digit floor(r * 1000 / b) lies in [0, 1000), so the digits put together, q * SCALE + d1 * 10**6 +
    d2 * 10**3 + d3, are floor(a * SCALE / b). |q| < 2**33 keeps q * SCALE below 8.6e18."""
    if -_WORDS < a < _WORDS and -_DIVISOR < b < _DIVISOR and b != 0:
        x: i64 = a
        y: i64 = b
        q = x // y
        if -_QUOTIENT < q < _QUOTIENT:
            r = x - q * y
            d1 = r * 1000 // y
            r = r * 1000 - d1 * y
            d2 = r * 1000 // y
            r = r * 1000 - d2 * y
            return q * SCALE + d1 * 1_000_000 + d2 * 1000 + r * 1000 // y
    return a * SCALE // b


def times(a: int, b: int) -> int:
    """`a * b`, exactly: compiled, in machine words where the product fits in int64 with room to spare (a
    money value times an instrument's multiplier, a price times basis points), else through Python's
    integers. The product's double decides: where it is within 2**62, the product is within
    2**62 * (1 + 2**-50), inside int64."""
    if -_WORDS < a < _WORDS and -_WORDS < b < _WORDS and -_FITS < float(a) * float(b) < _FITS:
        x: i64 = a
        y: i64 = b
        return x * y
    return a * b


def ratio(a: int, b: int) -> float:
    """`a / b` for two ints as Python computes it, correctly rounded, whether the caller runs compiled or
    not: mypyc divides two ints through their doubles (foxhunt/compiled.py), which rounds an int beyond
    2**53 first (a book of ten million dollars, in money nanos, is beyond it). Within 2**53 both are exact
    doubles, whose quotient IEEE 754 rounds correctly too; beyond, Python's own division."""
    if -EXACT <= a <= EXACT and -EXACT <= b <= EXACT:
        return float(a) / float(b)
    return _python_divide(a, b)


def _python_divide(a: object, b: object) -> float:
    return operator.truediv(a, b)  # typed as objects: Python's int division, also where compiled
