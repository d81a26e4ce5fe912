"""CSV market data: any file whose columns make a layout (adapters/feeds/layouts.py: bars, quotes or trades,
the columns found by their usual names or a `columns=` mapping), and HistData's tick files, which have no
header: `YYYYMMDD HHMMSSmmm,bid,ask,volume`, in EST without daylight saving (UTC-5 all year, as HistData
documents its files). The formats of ../shared/data are among them: TrueFX quotes (`timestamp,bid,ask`,
ISO-8601 with a UTC offset), HistData ticks and FXCM bars (`timestamp,open,high,low,close`).

The delimiter is the header's commonest of `,;|` and tab. A bar is emitted at its close (open time plus
the interval), when its values became known; the interval comes from the `interval=SECONDS` option or a
file name like `-m1-` / `-h1-`, the side from `side=bid|ask|mid|last` or a file name containing `-bid` /
`-ask`. The instrument is `symbol=X`, else each row's symbol column, else the one configured instrument
the file name contains.

A bad row (wrong field count, a number that is not a finite decimal, a price <= 0, a bar whose high and
low do not bracket it, a timestamp earlier than the previous row's, a symbol not configured) is an error
naming the file and line; with `--on-bad-row skip` it becomes a `FeedGap` input instead, so the journal
records what was skipped. Crossed and locked quotes are real data: they pass, and the kernel flags them.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from foxhunt.adapters.feeds import layouts
from foxhunt.adapters.feeds.layouts import BadRow, Layout, LayoutError
from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.fixed_point import parse_fixed
from foxhunt.messages.market import Bar, Instrument, PriceType, QuoteTick
from foxhunt.messages.system import FeedGap
from foxhunt.ports import Clock

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_HISTDATA_UTC_OFFSET_NS = 5 * 3600 * 1_000_000_000  # EST, no daylight saving
_HISTDATA_LINE = re.compile(r"^\d{8} \d{9},")
_INTERVAL_IN_NAME = re.compile(r"[-_.]([mh])(\d+)[-_.]", re.IGNORECASE)
_DELIMITERS = (",", ";", "\t", "|")
_HISTDATA = Layout("quotes", {"ts": ("0",), "bid": ("1",), "ask": ("2",)})  # by position: the file has no header

OPTIONS = ("symbol", "side", "interval", *layouts.OPTIONS)


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
    """Decimals from a row's fields: one pass when all is well (the common case), and the field-by-field
    parse below only to say which field is wrong."""
    try:
        return [parse_fixed(text) for text in fields]
    except ValueError:
        pass
    for text, name in zip(fields, names, strict=True):
        try:
            parse_fixed(text)
        except ValueError as e:
            raise BadRow(f"{name}: {e}") from None
    raise AssertionError("unreachable: parse_fixed raised for one of the fields")


@dataclass
class CsvFeed:
    path: Path
    symbol: str  # every row's instrument; "" where the rows name theirs (a symbol column)
    layout: Layout
    clock: Clock
    on_bad_row: str
    instruments: dict[str, Instrument]
    timestamp: Callable[[str], int] = histdata_to_ns
    delimiter: str = ","
    header: bool = True
    width: int = 4
    price_type: PriceType = PriceType.MID
    interval_ns: int = 0
    skipped: int = 0
    read_bytes: int = 0  # how far into the file the rows read so far go (for a progress bar)
    size_bytes: int = 0
    # where a row's fields are (positions; -1: the file has no such column): the timestamp (a second one: a
    # date and a time column), the prices (bid, ask; price, size; open, high, low, close), the sizes (bid and
    # ask size; a bar's volume), a trade's side and id, the row's symbol
    ts_at: int = 0
    time_at: int = -1
    price_at: list[int] = field(default_factory=list)
    size_at: list[int] = field(default_factory=list)
    side_at: int = -1
    id_at: int = -1
    symbol_at: int = -1

    @classmethod
    def from_options(
        cls, target: str, options: dict[str, str], instruments: dict[str, Instrument], clock: Clock, on_bad_row: str
    ) -> CsvFeed:
        if unknown := set(options) - set(OPTIONS):
            raise InputError(f"csv feed: unknown option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
        path = Path(target)
        try:
            with path.open(newline="") as f:
                first, second = f.readline().strip(), f.readline().strip()
            size = path.stat().st_size
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise InputError(f"{path}:1: not a text file ({e.reason} at byte {e.start})") from None
        if _HISTDATA_LINE.match(first) and "columns" not in options:
            symbol = options.get("symbol") or _symbol_from_name(path, instruments)
            _check_symbol(path, symbol, instruments)
            return cls(path, symbol, _HISTDATA, clock, on_bad_row, instruments, header=False, size_bytes=size,
                       price_at=[1, 2])
        delimiter = max(_DELIMITERS, key=first.count)
        header = next(csv.reader([first], delimiter=delimiter), [])
        try:
            layout = layouts.detect(header, layouts.parse_columns(options.get("columns", "")))
            sample = next(csv.reader([second], delimiter=delimiter), [""] * len(header))
            at = {name: i for i, name in reversed(list(enumerate(header)))}
            ts_at = [at[c] for c in layout.columns["ts"]]
            ts_sample = " ".join(sample[i] for i in ts_at if i < len(sample))
            timestamp = layouts.timestamp_parser(ts_sample, options.get("unit"), options.get("tz"),
                                                 options.get("ts_format"))
        except LayoutError as e:
            raise InputError(f"{path}:1: {e}") from None
        symbol = file_symbol(path, layout, options, instruments)
        def position(name: str) -> int:
            return at[layout.columns[name][0]] if name in layout.columns else -1

        feed = cls(path, symbol, layout, clock, on_bad_row, instruments, timestamp, delimiter, True, len(header),
                   size_bytes=size, ts_at=ts_at[0], time_at=ts_at[1] if len(ts_at) > 1 else -1,
                   price_at=[position(f) for f in _PRICES[layout.kind]],
                   size_at=[position(f) for f in _SIZES[layout.kind] if f in layout.columns],
                   side_at=position("side"), id_at=position("id"), symbol_at=-1 if symbol else position("symbol"))
        if layout.kind == "bars":
            feed.price_type, feed.interval_ns = bar_options(path, options)
        return feed

    def progress(self) -> tuple[int, int]:
        """(bytes read, bytes in all): where a progress bar stands."""
        return self.read_bytes, self.size_bytes

    def __iter__(self) -> Iterator[Input]:
        parse = {"quotes": self._quote, "trades": self._trade, "bars": self._bar}[self.layout.kind]
        stamp = self.clock.stamp
        width = self.width
        last_ts = 0
        with self.path.open("rb") as raw, io.TextIOWrapper(raw, newline="") as f:
            rows = csv.reader(f, delimiter=self.delimiter)
            if self.header:
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
                        raise InputError(f"{where}: {e}: {self.delimiter.join(row)[:120]!r}") from None
                    self.skipped += 1
                    yield FeedGap(ts_event=last_ts, ts_init=stamp(last_ts), source=where, reason=str(e))
                    continue
                last_ts = msg.ts_event
                if not rows.line_num & 1023:
                    self.read_bytes = raw.tell()  # a little ahead of the rows: the text layer reads in chunks
                yield msg
        self.read_bytes = self.size_bytes

    def _ts(self, row: list[str]) -> int:
        if self.time_at < 0:
            return self.timestamp(row[self.ts_at])
        return self.timestamp(f"{row[self.ts_at]} {row[self.time_at]}")

    def _row_symbol(self, row: list[str]) -> str:
        if self.symbol:
            return self.symbol
        symbol = row[self.symbol_at].strip()
        if symbol not in self.instruments:
            raise BadRow(f"symbol {symbol!r} is not a configured instrument; {_DECLARE.format(symbol=symbol)}")
        return symbol

    # Each builds the row's message where every check passes (the common case, without a call out), and
    # otherwise hands the row to the layout's builder, which says what is wrong.

    def _quote(self, row: list[str], stamp) -> Input:
        ts = self._ts(row)
        at = self.price_at
        bid, ask = prices([row[at[0]], row[at[1]]], _PRICES["quotes"])
        bid_size = ask_size = 0
        if self.size_at:
            bid_size, ask_size = prices([row[i] for i in self.size_at], _SIZES["quotes"])
        symbol = self._row_symbol(row)
        if bid > 0 and ask > 0 and bid_size >= 0 and ask_size >= 0:
            return QuoteTick(ts_event=ts, ts_init=stamp(ts), symbol=symbol, bid=bid, ask=ask, bid_size=bid_size,
                             ask_size=ask_size)
        return layouts.quote(ts, stamp(ts), symbol, bid, ask, bid_size, ask_size)

    def _trade(self, row: list[str], stamp) -> Input:
        ts = self._ts(row)
        at = self.price_at
        price, size = prices([row[at[0]], row[at[1]]], _PRICES["trades"])
        side = row[self.side_at] if self.side_at >= 0 else ""
        trade_id = row[self.id_at] if self.id_at >= 0 else ""
        return layouts.trade(ts, stamp(ts), self._row_symbol(row), price, size, side, trade_id)

    def _bar(self, row: list[str], stamp) -> Input:
        ts = self._ts(row) + self.interval_ns
        at = self.price_at
        o, h, lo, c = prices([row[at[0]], row[at[1]], row[at[2]], row[at[3]]], _PRICES["bars"])
        volume = prices([row[self.size_at[0]]], _SIZES["bars"])[0] if self.size_at else 0
        symbol = self._row_symbol(row)
        if 0 < lo <= min(o, c) and max(o, c) <= h and volume >= 0:
            return Bar(ts_event=ts, ts_init=stamp(ts), symbol=symbol, price_type=self.price_type,
                       interval_ns=self.interval_ns, open=o, high=h, low=lo, close=c, volume=volume)
        return layouts.bar(ts, stamp(ts), symbol, self.price_type, self.interval_ns, o, h, lo, c, volume)


_PRICES = {"bars": ("open", "high", "low", "close"), "quotes": ("bid", "ask"), "trades": ("price", "size")}
_SIZES = {"bars": ("volume",), "quotes": ("bid_size", "ask_size"), "trades": ()}
_DECLARE = ("declare it in the configuration's [instruments.{symbol}] or with --instrument"
            " {symbol}:tick_size=...,lot_size=...,currency=...")


def file_symbol(path: Path, layout: Layout, options: dict[str, str], instruments: dict[str, Instrument]) -> str:
    """Every row's instrument: `symbol=`, else (without a symbol column) the one the file name contains;
    "" where each row names its own."""
    if options.get("symbol") or "symbol" not in layout.columns:
        symbol = options.get("symbol") or _symbol_from_name(path, instruments)
        _check_symbol(path, symbol, instruments)
        return symbol
    return ""


def bar_options(path: Path, options: dict[str, str]) -> tuple[PriceType, int]:
    """A bar file's side and interval (nanoseconds), from the options or the file's name."""
    return _side(path, options.get("side")), _interval(path, options.get("interval"))


def _check_symbol(path: Path, symbol: str, instruments: dict[str, Instrument]) -> None:
    if symbol not in instruments:
        raise InputError(f"{path}: symbol {symbol!r} is not a configured instrument; {_DECLARE.format(symbol=symbol)}")


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
