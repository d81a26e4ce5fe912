"""CSV market data in the formats of ../shared/data (see its README), told apart by their first line:

- quotes: header `timestamp,bid,ask`, ISO-8601 timestamps with a UTC offset (TrueFX);
- HistData ticks: no header, `YYYYMMDD HHMMSSmmm,bid,ask,volume`, in EST without daylight saving
  (UTC-5 all year, as HistData documents its files);
- bars: header `timestamp,open,high,low,close`, ISO-8601 bar open times (FXCM). A bar is emitted at its
  close (open time plus the interval), when its values became known. The interval comes from the
  `interval=SECONDS` option or a file name like `-m1-` / `-h1-`; the side from `side=bid|ask|mid|last`
  or a file name containing `-bid` / `-ask`.

A bad row (wrong field count, a number that is not a finite decimal, a price <= 0, a bar whose high and
low do not bracket it, a timestamp earlier than the previous row's) is an error naming the file and line;
with `--on-bad-row skip` it becomes a `FeedGap` input instead, so the journal records what was skipped.
Crossed and locked quotes are real data: they pass, and the kernel flags them.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.fixed_point import parse_fixed
from foxhunt.messages.market import Bar, Instrument, PriceType, QuoteTick
from foxhunt.messages.system import FeedGap
from foxhunt.ports import Clock

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = _EPOCH.date().toordinal()
_US = dt.timedelta(microseconds=1)
_HISTDATA_UTC_OFFSET_NS = 5 * 3600 * 1_000_000_000  # EST, no daylight saving
_HISTDATA_LINE = re.compile(r"^\d{8} \d{9},")
_INTERVAL_IN_NAME = re.compile(r"[-_.]([mh])(\d+)[-_.]", re.IGNORECASE)


class BadRow(ValueError):
    pass


def iso_to_ns(text: str) -> int:
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise BadRow(f"not an ISO-8601 timestamp: {text!r}") from None
    if stamp.tzinfo is None:
        raise BadRow(f"timestamp without a UTC offset: {text!r}")
    return (stamp - _EPOCH) // _US * 1000


@functools.lru_cache(maxsize=64)
def _days_since_epoch(yyyymmdd: str) -> int:
    """Days from 1970-01-01 to a YYYYMMDD date; cached, since consecutive ticks share their date."""
    try:
        return dt.date(int(yyyymmdd[:4]), int(yyyymmdd[4:6]), int(yyyymmdd[6:8])).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        raise BadRow(f"invalid date {yyyymmdd!r}") from None


def histdata_to_ns(text: str) -> int:
    if len(text) != 18 or text[8] != " " or not (text[:8] + text[9:]).isdigit():
        raise BadRow(f"not a HistData timestamp (YYYYMMDD HHMMSSmmm): {text!r}")
    days = _days_since_epoch(text[:8])
    hh, mm, ss, ms = int(text[9:11]), int(text[11:13]), int(text[13:15]), int(text[15:18])
    if hh > 23 or mm > 59 or ss > 60:
        raise BadRow(f"invalid time in {text!r}")
    local_ns = ((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000 + ms) * 1_000_000
    return local_ns + _HISTDATA_UTC_OFFSET_NS


def prices(fields: list[str], names: tuple[str, ...]) -> list[int]:
    """Positive prices from a row's fields: one pass when all is well (the common case), and the
    field-by-field check below only to say which field is wrong."""
    try:
        values = [parse_fixed(text) for text in fields]
        if min(values) > 0:
            return values
    except ValueError:
        pass
    for text, name in zip(fields, names, strict=True):
        price(text, name)
    raise AssertionError("unreachable: price() raised for the bad field")


def price(text: str, name: str) -> int:
    try:
        value = parse_fixed(text)
    except ValueError as e:
        raise BadRow(f"{name}: {e}") from None
    if value <= 0:
        raise BadRow(f"{name} must be positive, got {text!r}")
    return value


@dataclass
class CsvFeed:
    path: Path
    symbol: str
    fmt: str  # quotes | histdata | bars
    clock: Clock
    on_bad_row: str
    price_type: PriceType = PriceType.MID
    interval_ns: int = 0
    skipped: int = 0

    @classmethod
    def from_options(
        cls, target: str, options: dict[str, str], instruments: dict[str, Instrument], clock: Clock, on_bad_row: str
    ) -> CsvFeed:
        known = {"symbol", "side", "interval"}
        if unknown := set(options) - known:
            raise InputError(f"csv feed: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
        path = Path(target)
        try:
            with path.open(newline="") as f:
                first = f.readline().strip()
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror}") from e
        symbol = options.get("symbol") or _symbol_from_name(path, instruments)
        if symbol not in instruments:
            raise InputError(f"{path}: symbol {symbol!r} is not a configured instrument")
        header = first.lower().replace(" ", "")
        if header == "timestamp,bid,ask":
            return cls(path, symbol, "quotes", clock, on_bad_row)
        if _HISTDATA_LINE.match(first):
            return cls(path, symbol, "histdata", clock, on_bad_row)
        if header == "timestamp,open,high,low,close":
            return cls(
                path, symbol, "bars", clock, on_bad_row,
                price_type=_side(path, options.get("side")), interval_ns=_interval(path, options.get("interval")),
            )
        raise InputError(
            f"{path}:1: unrecognised CSV format {first[:60]!r}; expected a 'timestamp,bid,ask' or"
            " 'timestamp,open,high,low,close' header, or HistData 'YYYYMMDD HHMMSSmmm,bid,ask,volume' rows"
        )

    def __iter__(self) -> Iterator[Input]:
        parse = {"quotes": self._quote, "histdata": self._histdata, "bars": self._bar}[self.fmt]
        width = {"quotes": 3, "histdata": 4, "bars": 5}[self.fmt]
        stamp = self.clock.stamp
        last_ts = 0
        with self.path.open(newline="") as f:
            rows = csv.reader(f)
            if self.fmt != "histdata":
                next(rows, None)
            for row in rows:
                if not row:
                    continue
                try:
                    if len(row) != width:
                        raise BadRow(f"expected {width} fields, got {len(row)}")
                    msg = parse(row, stamp)
                    if msg.ts_event < last_ts:
                        raise BadRow(f"timestamp goes backwards: {msg.ts_event} after {last_ts}")
                except BadRow as e:
                    where = f"{self.path}:{rows.line_num}"
                    if self.on_bad_row != "skip":
                        raise InputError(f"{where}: {e}: {','.join(row)[:120]!r}") from None
                    self.skipped += 1
                    yield FeedGap(ts_event=last_ts, ts_init=stamp(last_ts), source=where, reason=str(e))
                    continue
                last_ts = msg.ts_event
                yield msg

    def _quote(self, row: list[str], stamp) -> QuoteTick:
        return self._quote_at(iso_to_ns(row[0]), row, stamp)

    def _histdata(self, row: list[str], stamp) -> QuoteTick:
        return self._quote_at(histdata_to_ns(row[0]), row, stamp)

    def _quote_at(self, ts: int, row: list[str], stamp) -> QuoteTick:
        bid, ask = prices(row[1:3], ("bid", "ask"))
        return QuoteTick(ts_event=ts, ts_init=stamp(ts), symbol=self.symbol, bid=bid, ask=ask)

    def _bar(self, row: list[str], stamp) -> Bar:
        ts = iso_to_ns(row[0]) + self.interval_ns
        o, h, lo, c = prices(row[1:5], ("open", "high", "low", "close"))
        if not (lo <= min(o, c) and max(o, c) <= h):
            raise BadRow(f"high {row[2]} and low {row[3]} do not bracket open {row[1]} and close {row[4]}")
        return Bar(
            ts_event=ts, ts_init=stamp(ts), symbol=self.symbol, price_type=self.price_type,
            interval_ns=self.interval_ns, open=o, high=h, low=lo, close=c,
        )


def _symbol_from_name(path: Path, instruments: dict[str, Instrument]) -> str:
    name = path.name.lower()
    matches = [s for s in instruments if s.lower() in name]
    if len(matches) != 1:
        raise InputError(
            f"{path}: cannot tell the instrument from the file name; add ',symbol=X' to the feed spec"
            f" (configured: {', '.join(sorted(instruments))})"
        )
    return matches[0]


def _side(path: Path, option: str | None) -> PriceType:
    if option:
        try:
            return PriceType(option.upper())
        except ValueError:
            raise InputError(f"csv feed: side={option!r}; expected bid, ask, mid or last") from None
    name = path.name.lower()
    return PriceType.BID if "-bid" in name else PriceType.ASK if "-ask" in name else PriceType.MID


def _interval(path: Path, option: str | None) -> int:
    if option:
        if not option.isdigit() or int(option) <= 0:
            raise InputError(f"csv feed: interval={option!r}; expected a positive number of seconds")
        return int(option) * 1_000_000_000
    found = _INTERVAL_IN_NAME.search(path.name)
    if not found:
        raise InputError(f"{path}: bar interval unknown; add ',interval=SECONDS' to the feed spec")
    unit = 60 if found.group(1).lower() == "m" else 3600
    return int(found.group(2)) * unit * 1_000_000_000
