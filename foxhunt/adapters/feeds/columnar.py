"""Parquet and Arrow files of market data, through pyarrow: `parquet:PATH[,k=v...]`, `arrow:PATH[,k=v...]`.

The columns make a layout as a CSV file's do (adapters/feeds/layouts.py: the usual names or a `columns=`
mapping; the same `symbol`, `side`, `interval`, `tz`, `unit` and `ts_format` options). A batch of rows is
converted column by column: Arrow timestamps to nanoseconds in their own unit and zone (a timestamp type
without a zone needs `tz=`, as an ISO text without an offset does), integers since the epoch by the first
value's magnitude or `unit=`, text as in a CSV file; prices and sizes from floats to fixed point by
rounding to the nearest nanounit (exact for any decimal of at most 9 places below about 10^6, where a
float64 keeps 15 significant digits), from decimals and text exactly. A row is then checked and built by
the same functions as a CSV row; a bad one is an error naming the file, the row group (or record batch)
and the row within it, or with `--on-bad-row skip` a `FeedGap`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq

from foxhunt.adapters.feeds import layouts
from foxhunt.adapters.feeds.csv_feed import OPTIONS, bar_options, file_symbol
from foxhunt.adapters.feeds.layouts import BadRow, Layout, LayoutError
from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.fixed_point import SCALE, parse_fixed
from foxhunt.messages.market import Bar, Instrument, PriceType, QuoteTick, TradeTick
from foxhunt.messages.system import FeedGap
from foxhunt.ports import Clock

_NUMBERS = {"bars": ("open", "high", "low", "close", "volume"), "quotes": ("bid", "ask", "bid_size", "ask_size"),
            "trades": ("price", "size")}
_TEXTS = ("side", "id", "symbol")


@dataclass
class ColumnarFeed:
    path: Path
    kind: str  # parquet | arrow
    symbol: str  # every row's instrument; "" where the rows name theirs
    layout: Layout
    clock: Clock
    on_bad_row: str
    instruments: dict[str, Instrument]
    options: dict[str, str]
    price_type: PriceType = PriceType.MID
    interval_ns: int = 0
    skipped: int = 0
    rows_read: int = 0
    rows_total: int = 0

    @classmethod
    def from_options(cls, kind: str, target: str, options: dict[str, str], instruments: dict[str, Instrument],
                     clock: Clock, on_bad_row: str) -> ColumnarFeed:
        if unknown := set(options) - set(OPTIONS):
            raise InputError(f"{kind} feed: unknown option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
        path = Path(target)
        try:
            schema, rows = _schema(kind, path)
            layout = layouts.detect(schema.names, layouts.parse_columns(options.get("columns", "")))
            layouts.timestamp_parser("0", options.get("unit"), options.get("tz"), None)  # checks unit and tz
        except LayoutError as e:
            raise InputError(f"{path}: {e}") from None
        symbol = file_symbol(path, layout, options, instruments)
        feed = cls(path, kind, symbol, layout, clock, on_bad_row, instruments, options, rows_total=rows)
        if layout.kind == "bars":
            feed.price_type, feed.interval_ns = bar_options(path, options)
        return feed

    def progress(self) -> tuple[int, int]:
        """(rows read, rows in all): where a progress bar stands."""
        return self.rows_read, self.rows_total

    def __iter__(self) -> Iterator[Input]:
        build = {"quotes": self._quotes, "trades": self._trades, "bars": self._bars}[self.layout.kind]
        stamp = self.clock.stamp
        last_ts = 0
        timestamps: Callable[[pa.RecordBatch, str], list[Any]] | None = None
        for where, batch in _batches(self.kind, self.path):
            try:
                if timestamps is None:
                    timestamps = _timestamp_column(batch, self.layout.columns["ts"], self.options)
                ts = timestamps(batch, where)
                columns = {f: _numbers(batch.column(c[0]), f) for f in _NUMBERS[self.layout.kind]
                           if (c := self.layout.columns.get(f))}
                texts = {f: _texts(batch.column(c[0])) for f in _TEXTS if (c := self.layout.columns.get(f))}
            except BadRow as e:
                raise InputError(f"{self.path}: {where}: {e}") from None
            fast = self._fast(ts, columns, texts, stamp, last_ts)
            if fast is not None:  # every row of the batch passes every check: built without asking each
                self.rows_read += len(fast)
                if fast:
                    last_ts = fast[-1].ts_event
                yield from fast
                continue
            for i, msg in enumerate(build(ts, columns, texts, stamp, batch.num_rows)):
                self.rows_read += 1
                if isinstance(msg, BadRow) or msg.ts_event < last_ts:
                    reason = str(msg) if isinstance(msg, BadRow) else (
                        f"timestamp goes backwards: {msg.ts_event} after {last_ts}")
                    place = f"{self.path}: {where}, row {i}"
                    if self.on_bad_row != "skip":
                        raise InputError(f"{place}: {reason}")
                    self.skipped += 1
                    yield FeedGap(ts_event=last_ts, ts_init=stamp(last_ts), source=place, reason=reason)
                    continue
                last_ts = msg.ts_event
                yield msg

    def _fast(self, ts: list[Any], columns: dict[str, list[Any]], texts: dict[str, list[Any]], stamp,
              last_ts: int) -> list[Input] | None:
        """The batch's messages where all its values are there and pass the checks (tested on whole columns
        with numpy); None where any row fails one, so the rows are built one by one to say which."""
        if not ts:
            return []
        symbols = [self.symbol] * len(ts) if self.symbol else texts["symbol"]
        if not self.symbol and not set(symbols) <= self.instruments.keys():
            return None
        numbers = [columns[f] for f in _NUMBERS[self.layout.kind] if f in columns]
        if not all(type(v) is int for column in (ts, *numbers) for v in column):
            return None
        t = np.asarray(ts, dtype=np.int64)
        if t[0] < last_ts or (np.diff(t) < 0).any():
            return None
        arrays = {f: np.asarray(columns[f], dtype=np.int64) for f in columns}
        kind = self.layout.kind
        if kind == "quotes":
            if (arrays["bid"] <= 0).any() or (arrays["ask"] <= 0).any() or any(
                    (arrays[f] < 0).any() for f in ("bid_size", "ask_size") if f in arrays):
                return None
            zeros = [0] * len(ts)
            return [QuoteTick(ts_event=e, ts_init=stamp(e), symbol=y, bid=b, ask=a, bid_size=bs, ask_size=az)
                    for e, y, b, a, bs, az in zip(ts, symbols, columns["bid"], columns["ask"],
                                                  columns.get("bid_size", zeros), columns.get("ask_size", zeros),
                                                  strict=True)]
        if kind == "trades":
            sides = texts.get("side") or [""] * len(ts)
            aggressors = {v: layouts.SIDES.get((v or "").lower()) for v in set(sides)}
            if (arrays["price"] <= 0).any() or (arrays["size"] <= 0).any() or None in aggressors.values():
                return None
            ids = texts.get("id") or [""] * len(ts)
            return [TradeTick(ts_event=e, ts_init=stamp(e), symbol=y, price=p, size=q, aggressor=aggressors[a],
                              trade_id=i or "")
                    for e, y, p, q, a, i in zip(ts, symbols, columns["price"], columns["size"], sides, ids,
                                                strict=True)]
        o, h, lo, c = (arrays[f] for f in ("open", "high", "low", "close"))
        if (lo <= 0).any() or (lo > np.minimum(o, c)).any() or (np.maximum(o, c) > h).any() or (
                "volume" in arrays and (arrays["volume"] < 0).any()):
            return None
        step, price_type = self.interval_ns, self.price_type
        volumes = columns.get("volume") or [0] * len(ts)
        return [Bar(ts_event=e + step, ts_init=stamp(e + step), symbol=y, price_type=price_type,
                    interval_ns=step, open=op, high=hi, low=lw, close=cl, volume=v)
                for e, y, op, hi, lw, cl, v in zip(ts, symbols, columns["open"], columns["high"], columns["low"],
                                                   columns["close"], volumes, strict=True)]

    def _symbols(self, texts: dict[str, list[Any]], n: int) -> list[str]:
        if self.symbol:
            return [self.symbol] * n
        return [s if s in self.instruments else "" for s in texts["symbol"]]

    def _rows(self, make: Callable[..., Input], ts: list[Any], values: dict[str, list[Any]], symbols: list[str],
              texts: list[list[Any]], stamp) -> Iterator[Input | BadRow]:
        """Each row's message, or the BadRow saying why there is none: a value a column could not give is
        None (null) or the BadRow of its conversion."""
        names, columns = list(values), list(values.values())
        symbol_texts = texts[-1]
        for i, t in enumerate(ts):
            try:
                if type(t) is not int:
                    raise t if isinstance(t, BadRow) else BadRow("timestamp is missing (null)")
                symbol = symbols[i]
                if not symbol:
                    raise BadRow(f"symbol {symbol_texts[i]!r} is not a configured instrument; declare it with"
                                 f" --instrument {symbol_texts[i]}:tick_size=...,lot_size=...,currency=...")
                row = [column[i] for column in columns]
                for name, value in zip(names, row, strict=True):
                    if type(value) is not int:
                        raise value if isinstance(value, BadRow) else BadRow(f"{name} is missing (null)")
                yield make(t, stamp(t), symbol, *row, *(text[i] or "" for text in texts[:-1]))
            except BadRow as e:
                yield e

    def _quotes(self, ts, columns, texts, stamp, n) -> Iterator[Input | BadRow]:
        zeros = [0] * n
        values = {f: columns.get(f, zeros) for f in ("bid", "ask", "bid_size", "ask_size")}
        return self._rows(layouts.quote, ts, values, self._symbols(texts, n), [texts.get("symbol", [])], stamp)

    def _trades(self, ts, columns, texts, stamp, n) -> Iterator[Input | BadRow]:
        blank = [""] * n
        values = {"price": columns["price"], "size": columns["size"]}
        return self._rows(layouts.trade, ts, values, self._symbols(texts, n),
                          [texts.get("side", blank), texts.get("id", blank), texts.get("symbol", [])], stamp)

    def _bars(self, ts, columns, texts, stamp, n) -> Iterator[Input | BadRow]:
        def bar(t, t_init, symbol, o, h, lo, c, volume):
            return layouts.bar(t + self.interval_ns, stamp(t + self.interval_ns), symbol, self.price_type,
                               self.interval_ns, o, h, lo, c, volume)

        values = {f: columns.get(f, [0] * n) for f in ("open", "high", "low", "close", "volume")}
        return self._rows(bar, ts, values, self._symbols(texts, n), [texts.get("symbol", [])], stamp)


def _schema(kind: str, path: Path) -> tuple[pa.Schema, int]:
    try:
        if kind == "parquet":
            meta = pq.ParquetFile(path)
            return meta.schema_arrow, meta.metadata.num_rows
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            return reader.schema, sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except FileNotFoundError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or 'no such file'}") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"{path}: not a {'Parquet' if kind == 'parquet' else 'Arrow IPC'} file: {e}") from None


def _batches(kind: str, path: Path) -> Iterator[tuple[str, pa.RecordBatch]]:
    if kind == "parquet":
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            yield f"row group {group}", parquet.read_row_group(group).combine_chunks().to_batches()[0]
        return
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield f"record batch {i}", reader.get_batch(i)


def _timestamp_column(batch: pa.RecordBatch, columns: tuple[str, ...], options: dict[str, str]
                      ) -> Callable[[pa.RecordBatch, str], list[int]]:
    """How this file's timestamps become nanoseconds since the epoch, decided on its first batch."""
    first = batch.column(columns[0])
    if len(columns) == 2 or pa.types.is_string(first.type) or pa.types.is_large_string(first.type):
        sample = " ".join(str(batch.column(c)[0]) for c in columns) if batch.num_rows else ""
        parse = layouts.timestamp_parser(sample, options.get("unit"), options.get("tz"), options.get("ts_format"))

        def texts(b: pa.RecordBatch, where: str) -> list[Any]:
            out: list[Any] = []
            for value in zip(*(b.column(c).to_pylist() for c in columns), strict=True):
                try:
                    out.append(None if None in value else parse(" ".join(value)))
                except BadRow as e:
                    out.append(e)
            return out
        return texts
    if pa.types.is_timestamp(first.type):
        zone = first.type.tz or options.get("tz")
        if not zone:
            raise BadRow(f"column {columns[0]!r} is a timestamp without a time zone; say which with tz=UTC")

        def stamps(b: pa.RecordBatch, where: str) -> list[int]:
            column = b.column(columns[0])
            if not column.type.tz:
                column = pc.assume_timezone(column, zone)
            return column.cast(pa.timestamp("ns", "UTC")).cast(pa.int64()).to_pylist()
        return stamps
    if pa.types.is_integer(first.type) or pa.types.is_floating(first.type):
        sample = str(first[0].as_py()) if batch.num_rows else "0"
        unit = options.get("unit") or layouts.epoch_unit(sample)
        scale = layouts.UNITS[unit]

        def numbers(b: pa.RecordBatch, where: str) -> list[Any]:
            column = b.column(columns[0])
            if pa.types.is_integer(column.type):
                return pc.multiply_checked(column.cast(pa.int64()), scale).to_pylist()
            return [None if v is None else round(v * scale) if math.isfinite(v) else BadRow(f"timestamp {v}")
                    for v in column.to_pylist()]
        return numbers
    raise BadRow(f"column {columns[0]!r} of type {first.type} cannot be a timestamp (a timestamp, an integer or"
                 " text is)")


def _numbers(column: pa.Array, name: str) -> list[Any]:
    """A column of prices or sizes in fixed point (nanounits); a value that has none is None (null) or the
    BadRow saying why."""
    kind = column.type
    if pa.types.is_floating(kind):
        values = column.to_numpy(zero_copy_only=False)
        finite = np.isfinite(values) & (np.abs(values) < 2**63 / SCALE)
        out: list[Any] = np.rint(np.where(finite, values, 0.0) * SCALE).astype(np.int64).tolist()
        if not finite.all():
            for i in np.flatnonzero(~finite).tolist():
                out[i] = None if column[i].as_py() is None else BadRow(f"{name}: not a finite decimal: {values[i]}")
        return out
    if pa.types.is_integer(kind):
        try:
            return pc.multiply_checked(column.cast(pa.int64()), SCALE).to_pylist()
        except pa.ArrowInvalid:
            pass  # an overflow somewhere: the slow way, to say where
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind) or pa.types.is_string(kind) \
            or pa.types.is_large_string(kind):
        out = []
        for v in column.to_pylist():
            try:
                out.append(None if v is None else parse_fixed(str(v)))
            except ValueError as e:
                out.append(BadRow(f"{name}: {e}"))
        return out
    raise BadRow(f"column for {name} is of type {kind}; expected numbers (floats, integers, decimals or text)")


def _texts(column: pa.Array) -> list[Any]:
    return [None if v is None else str(v).strip() for v in column.to_pylist()]
