"""What the columns of a market data file mean: pure tables and functions, no I/O.

A file is one of three layouts, told apart by which fields its columns give:

- bars:   ts, open, high, low, close [, volume] [, symbol]
- quotes: ts, bid, ask [, bid_size, ask_size] [, symbol]
- trades: ts, price, size [, side] [, id] [, symbol]

A column is found by its name (`FIELD_NAMES`: the usual names in vendors' exports, compared in lower case
with spaces, dashes and angle brackets dropped) or named in a mapping, `columns=ts:timestamp_utc;open:o`,
which wins over the names. Tardis.dev's CSV layouts are among them: `quotes` (`exchange,symbol,timestamp,
local_timestamp,ask_amount,ask_price,bid_price,bid_amount`) and `trades` (`exchange,symbol,timestamp,
local_timestamp,id,side,price,amount`), timestamps in microseconds since the epoch (docs.tardis.dev,
"Downloadable CSV files"); the exchange's `timestamp` is the event time, `local_timestamp` (when Tardis
received it) is left.

Timestamps (`timestamp_parser`): ISO 8601 text, with a UTC offset or a zone given as `tz=Europe/London`
(a time without either is refused: nobody can tell which hour it was); a `ts_format=` for strptime;
numbers since the epoch in seconds (fractions allowed), milliseconds, microseconds or nanoseconds, the
unit told by the first row's magnitude (10 digits seconds, 13 milliseconds, 16 microseconds, 19
nanoseconds) or given as `unit=s|ms|us|ns`; a date and a time column (`ts:date+time`) joined by a space.

Rows become messages through `quote`, `trade` and `bar`, which check what every source must check
(positive prices, a high and low that bracket the bar, sizes not negative) and raise `BadRow` saying what.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from foxhunt.messages.fixed_point import format_fixed
from foxhunt.messages.market import AggressorSide, Bar, PriceType, QuoteTick, TradeTick


class BadRow(ValueError):
    pass


class LayoutError(ValueError):
    """The file's columns make no layout, or a mapping names what the file does not have."""


# field -> the column names it goes by, in order of preference (compared after `normalize`)
FIELD_NAMES: Mapping[str, tuple[str, ...]] = {
    "ts": ("timestamp", "ts", "time", "datetime", "date_time", "timestamp_utc", "time_utc", "datetime_utc",
           "utc", "gmt_time", "ts_event", "open_time", "unix", "epoch", "t", "date"),
    "open": ("open", "o", "open_price", "first"),
    "high": ("high", "h", "high_price", "max"),
    "low": ("low", "l", "low_price", "min"),
    "close": ("close", "c", "close_price"),
    "volume": ("volume", "vol", "v", "base_volume", "tick_volume", "tickvol"),
    "bid": ("bid", "bid_price", "bidprice", "best_bid", "bid_px", "bid1"),
    "ask": ("ask", "ask_price", "askprice", "best_ask", "ask_px", "ask1", "offer", "offer_price"),
    "bid_size": ("bid_size", "bid_amount", "bidsize", "bid_qty", "bid_volume", "bid_sz"),
    "ask_size": ("ask_size", "ask_amount", "asksize", "ask_qty", "ask_volume", "ask_sz", "offer_size"),
    "price": ("price", "last", "last_price", "trade_price", "px"),
    "size": ("size", "amount", "qty", "quantity", "last_size", "trade_size", "sz", "volume"),
    "side": ("side", "aggressor", "aggressor_side", "taker_side"),
    "id": ("id", "trade_id", "tradeid", "match_id"),
    "symbol": ("symbol", "ticker", "instrument", "sym"),
}

# layout -> (required fields, optional fields); tried in this order, the first whose required fields the
# columns give wins (a trades file may have a `volume` column for its sizes, a bar file never has a `price`)
LAYOUTS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "bars": (("ts", "open", "high", "low", "close"), ("volume", "symbol")),
    "quotes": (("ts", "bid", "ask"), ("bid_size", "ask_size", "symbol")),
    "trades": (("ts", "price", "size"), ("side", "id", "symbol")),
}

SIDES: Mapping[str, AggressorSide] = {
    "buy": AggressorSide.BUYER, "b": AggressorSide.BUYER, "buyer": AggressorSide.BUYER, "bid": AggressorSide.BUYER,
    "1": AggressorSide.BUYER,
    "sell": AggressorSide.SELLER, "s": AggressorSide.SELLER, "seller": AggressorSide.SELLER,
    "ask": AggressorSide.SELLER, "-1": AggressorSide.SELLER,
    "": AggressorSide.NONE, "unknown": AggressorSide.NONE, "none": AggressorSide.NONE, "0": AggressorSide.NONE,
}

UNITS: Mapping[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
OPTIONS = ("columns", "tz", "unit", "ts_format")  # what a spec may say about a file's columns


@dataclass(frozen=True)
class Layout:
    kind: str  # bars | quotes | trades
    columns: Mapping[str, tuple[str, ...]]  # field -> the file's column(s) it is read from (two: date+time)

    def describe(self) -> str:
        return f"{self.kind} ({', '.join(f + '=' + '+'.join(c) for f, c in self.columns.items())})"


def normalize(name: str) -> str:
    return re.sub(r"[\s\-<>]+", "_", name.strip().strip("<>").lower()).strip("_")


def parse_columns(text: str) -> dict[str, tuple[str, ...]]:
    """`ts:timestamp_utc;open:o` -> {'ts': ('timestamp_utc',), 'open': ('o',)}; `ts:date+time` names two."""
    mapping: dict[str, tuple[str, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        field, sep, column = part.partition(":")
        field = field.strip()
        if not sep or not column.strip():
            raise LayoutError(f"columns: {part!r} is not FIELD:COLUMN (as in ts:timestamp_utc;open:o)")
        if field not in FIELD_NAMES:
            raise LayoutError(f"columns: unknown field {field!r}; known: {', '.join(FIELD_NAMES)}")
        names = tuple(c.strip() for c in column.split("+"))
        if len(names) > (2 if field == "ts" else 1):
            raise LayoutError(f"columns: {part!r}: only ts may join two columns (ts:date+time)")
        mapping[field] = names
    return mapping


def detect(header: Sequence[str], mapping: Mapping[str, tuple[str, ...]] | None = None) -> Layout:
    """The layout of a file whose column names are `header`: the mapping's columns first, then the usual
    names. Raises LayoutError naming the columns found and what each layout needs."""
    mapping = mapping or {}
    by_name = {normalize(h): h for h in reversed(header)}  # the first of two columns of one name wins
    found: dict[str, tuple[str, ...]] = {}
    for field, columns in mapping.items():
        missing = [c for c in columns if c not in header and normalize(c) not in by_name]
        if missing:
            raise LayoutError(f"columns: {field}:{'+'.join(columns)}: no column {missing[0]!r} in"
                              f" {', '.join(header)}")
        found[field] = tuple(c if c in header else by_name[normalize(c)] for c in columns)
    if "ts" not in found and "date" in by_name and "time" in by_name:  # a date column and a time column
        found["ts"] = (by_name["date"], by_name["time"])
    taken = {c for cs in found.values() for c in cs}
    for field, names in FIELD_NAMES.items():
        if field in found:
            continue
        for name in names:
            column = by_name.get(name)
            if column is not None and column not in taken:
                found[field] = (column,)
                break
    for kind, (required, optional) in LAYOUTS.items():
        if all(f in found for f in required):
            if kind == "trades" and found["size"] in (found.get("ask_size"), found.get("bid_size")):
                continue
            return Layout(kind, {f: found[f] for f in (*required, *optional) if f in found})
    needs = "; ".join(f"{kind}: {', '.join(required)}" for kind, (required, _) in LAYOUTS.items())
    raise LayoutError(f"columns {', '.join(header)} make no known layout (the fields each needs, {needs});"
                      " name them with columns=FIELD:COLUMN;... as in columns=ts:time;bid:b;ask:a")


def timestamp_parser(sample: str, unit: str | None, tz: str | None, ts_format: str | None
                     ) -> Callable[[str], int]:
    """A function from a timestamp's text to nanoseconds since the epoch, chosen by the options and the
    first row's `sample`."""
    zone = _zone(tz)
    if unit is not None and unit not in UNITS:
        raise LayoutError(f"unit={unit!r}; expected one of {', '.join(UNITS)}")
    if ts_format:
        def formatted(text: str) -> int:
            try:
                stamp = dt.datetime.strptime(text.strip(), ts_format)
            except ValueError:
                raise BadRow(f"timestamp {text!r} does not match ts_format {ts_format!r}") from None
            return _aware_ns(stamp, zone, text)
        return formatted
    if unit is not None or _NUMBER.match(sample.strip()):
        scale = UNITS[unit or epoch_unit(sample)]
        return lambda text: epoch_ns(text, scale)
    return iso_utc_ns if zone is None else lambda text: iso_ns(text, zone)


_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US = dt.timedelta(microseconds=1)


def epoch_unit(sample: str) -> str:
    """The unit of a number since the epoch, by its digits: 10 seconds (2001-2286), 13 milliseconds, 16
    microseconds, 19 nanoseconds; fewer than 10 seconds too (before 2001)."""
    digits = len(sample.strip().lstrip("-").partition(".")[0])
    return "s" if digits <= 11 else "ms" if digits <= 14 else "us" if digits <= 17 else "ns"


def epoch_ns(text: str, scale: int) -> int:
    if text.isdigit():
        return int(text) * scale
    if not _NUMBER.match(text.strip()):
        raise BadRow(f"not a number since the epoch: {text!r}")
    nanos = decimal.Decimal(text.strip()) * scale  # exact: a decimal text times a power of ten
    if nanos != nanos.to_integral_value():
        raise BadRow(f"{text!r} is finer than a nanosecond")
    return int(nanos)


def iso_utc_ns(text: str) -> int:
    """An ISO-8601 text with its UTC offset (the common case, one call a row)."""
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        return iso_ns(text, None)  # says what is wrong
    if stamp.tzinfo is None:
        return iso_ns(text, None)
    return (stamp - _EPOCH) // _US * 1000


def iso_ns(text: str, zone: dt.tzinfo | None) -> int:
    try:
        stamp = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadRow(f"not an ISO-8601 timestamp: {text!r}") from None
    return _aware_ns(stamp, zone, text)


def _aware_ns(stamp: dt.datetime, zone: dt.tzinfo | None, text: str) -> int:
    if stamp.tzinfo is None:
        if zone is None:
            raise BadRow(f"timestamp without a UTC offset: {text!r} (say which zone with tz=UTC or tz=Europe/London)")
        stamp = stamp.replace(tzinfo=zone)
    return (stamp - _EPOCH) // _US * 1000


def _zone(tz: str | None) -> dt.tzinfo | None:
    if not tz:
        return None
    if tz.upper() == "UTC":
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise LayoutError(f"tz={tz!r}: not a time zone (UTC, or an IANA name such as America/New_York)") from None


# --- rows to messages: what every source checks ---------------------------------------------------


def positive(value: int, name: str) -> None:
    if value <= 0:
        raise BadRow(f"{name} must be positive, got {format_fixed(value)!r}")


def not_negative(value: int, name: str) -> None:
    if value < 0:
        raise BadRow(f"{name} must not be negative, got {format_fixed(value)!r}")


def quote(ts: int, ts_init: int, symbol: str, bid: int, ask: int, bid_size: int = 0, ask_size: int = 0) -> QuoteTick:
    if bid <= 0 or ask <= 0 or bid_size < 0 or ask_size < 0:  # one test for the common case, then which
        positive(bid, "bid")
        positive(ask, "ask")
        not_negative(bid_size, "bid_size")
        not_negative(ask_size, "ask_size")
    return QuoteTick(ts_event=ts, ts_init=ts_init, symbol=symbol, bid=bid, ask=ask, bid_size=bid_size,
                     ask_size=ask_size)


def trade(ts: int, ts_init: int, symbol: str, price: int, size: int, side: str = "", trade_id: str = "") -> TradeTick:
    positive(price, "price")
    positive(size, "size")
    aggressor = SIDES.get(side.strip().lower())
    if aggressor is None:
        raise BadRow(f"side {side!r}: expected buy or sell (or empty, unknown)")
    return TradeTick(ts_event=ts, ts_init=ts_init, symbol=symbol, price=price, size=size, aggressor=aggressor,
                     trade_id=trade_id)


def bar(ts: int, ts_init: int, symbol: str, price_type: PriceType, interval_ns: int, o: int, h: int, lo: int,
        c: int, volume: int = 0) -> Bar:
    for value, name in ((o, "open"), (h, "high"), (lo, "low"), (c, "close")):
        positive(value, name)
    not_negative(volume, "volume")
    if not (lo <= min(o, c) and max(o, c) <= h):
        raise BadRow(f"high {format_fixed(h)} and low {format_fixed(lo)} do not bracket open {format_fixed(o)} and"
                     f" close {format_fixed(c)}")
    return Bar(ts_event=ts, ts_init=ts_init, symbol=symbol, price_type=price_type, interval_ns=interval_ns,
               open=o, high=h, low=lo, close=c, volume=volume)
