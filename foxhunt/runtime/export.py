"""`foxhunt journal export NAME --to FILE.parquet|FILE.csv [--kinds K,...] [--from TIME] [--until TIME]`: a
journal as a table for pandas, polars or a spreadsheet, one row per event.

The columns: `seq`, `causation` (the input's seq for a derived event, empty for an input), `kind`, `ts_event`
and `ts_init` (Arrow timestamps in nanoseconds, UTC), then every field of the kinds exported, typed: a fixed-
point number (a price, a quantity, money: messages/base.py, FIXED_POINT_FIELDS) as an exact decimal of 9
places, a count as an integer, a float, a boolean or a text as itself, an enumeration as its value (as
`journal show` prints it), and anything nested (a list, a map, bytes) as JSON text. A field that two kinds
give different types (`previous` is a position of TargetChanged and a state of TradingStateChanged) is text in
both. A row leaves empty the fields its kind does not have. The events are read page by page and held as Arrow
columns until written (about 100 bytes an event): `--kinds` and a time window keep a large export small.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from foxhunt.errors import InputError
from foxhunt.messages import codec
from foxhunt.messages.base import FIXED_POINT_FIELDS, Enum, Message
from foxhunt.ports import JournalStore

FIXED = pa.decimal128(38, 9)  # nanos are 9 decimal places; int64's 19 digits fit with room
TIMESTAMP = pa.timestamp("ns", "UTC")
COMMON = ("seq", "causation", "kind", "ts_event", "ts_init")


def _arrow_type(name: str, hint: Any) -> pa.DataType:
    if hint in (int, int | None):
        return FIXED if name in FIXED_POINT_FIELDS else pa.int64()
    if hint in (float, float | None):
        return pa.float64()
    if hint in (bool, bool | None):
        return pa.bool_()
    if hint in (str, str | None) or (isinstance(hint, type) and issubclass(hint, Enum)):
        return pa.string()
    return pa.string()  # nested: JSON text (nested is True below)


def _fields() -> dict[str, tuple[pa.DataType, bool]]:
    """Every message field's column: its type and whether it is written as JSON, over all message types."""
    seen: dict[str, set[tuple[pa.DataType, bool]]] = {}
    for cls in codec.MESSAGE_TYPES:
        hints = typing.get_type_hints(cls)
        for f in msgspec.structs.fields(cls):
            if f.name in COMMON:
                continue
            hint = hints[f.name]
            simple = hint in (int, float, bool, str, int | None, float | None, bool | None, str | None) or (
                isinstance(hint, type) and issubclass(hint, Enum))
            seen.setdefault(f.name, set()).add((_arrow_type(f.name, hint), not simple))
    return {name: next(iter(kinds)) if len(kinds) == 1 else (pa.string(), any(j for _, j in kinds))
            for name, kinds in seen.items()}


FIELDS = _fields()
FIELDS_OF = {cls.__name__: [f.name for f in msgspec.structs.fields(cls) if f.name not in COMMON]
             for cls in codec.MESSAGE_TYPES}


def kinds_of(text: str | None) -> frozenset[str] | None:
    """`--kinds QuoteTick,OrderFilled` -> those names; None: every kind. An unknown name is an error listing
    the known ones."""
    if not text:
        return None
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    if unknown := sorted(kinds - set(FIELDS_OF)):
        raise InputError(f"--kinds: unknown kind(s) {', '.join(unknown)}; known: {', '.join(sorted(FIELDS_OF))}")
    return kinds


def _text(value: Any, nested: bool) -> str | None:
    if value is None:
        return None
    if isinstance(value, Enum):
        return str(value.value)
    if nested:
        return json.dumps(msgspec.to_builtins(value), sort_keys=True)
    return str(value)


def _fixed(values: list[int | None]) -> pa.Array:
    """Nanos as decimal128(38, 9): the decimal's unscaled integer is the nanos themselves, so the column is
    built from them, sign-extended to 128 bits, without any arithmetic."""
    valid = np.array([v is not None for v in values])
    nanos = np.array([v if v is not None else 0 for v in values], dtype=np.int64)
    words = np.empty((len(nanos), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = nanos, nanos >> 63
    bitmap = None if valid.all() else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(FIXED, len(nanos), [bitmap, pa.py_buffer(words.tobytes())],
                                 null_count=int((~valid).sum()))


def _page_table(rows: list[tuple[int, int | None, Message]]) -> pa.Table:
    kinds = {type(m).__name__ for _, _, m in rows}
    names = [n for n in FIELDS if any(n in FIELDS_OF[k] for k in kinds)]
    columns: dict[str, pa.Array] = {
        "seq": pa.array([s for s, _, _ in rows], pa.int64()),
        "causation": pa.array([c for _, c, _ in rows], pa.int64()),
        "kind": pa.array([type(m).__name__ for _, _, m in rows], pa.string()),
        "ts_event": pa.array([m.ts_event for _, _, m in rows], pa.int64()).cast(TIMESTAMP),
        "ts_init": pa.array([m.ts_init for _, _, m in rows], pa.int64()).cast(TIMESTAMP),
    }
    for name in names:
        kind, nested = FIELDS[name]
        values = [getattr(m, name, None) for _, _, m in rows]
        if kind == FIXED:
            columns[name] = _fixed(values)
        elif kind == pa.string():
            columns[name] = pa.array([_text(v, nested) for v in values], pa.string())
        else:
            columns[name] = pa.array(values, kind)
    return pa.table(columns)


async def export(store: JournalStore, name: str, out: Path, kinds: frozenset[str] | None = None,
                 start: int | None = None, end: int | None = None,
                 progress: Callable[[int], None] | None = None) -> dict[str, object]:
    """Write the journal's events (of `kinds`, with ts_event in [start, end)) to `out`: Parquet for a
    .parquet or .pq name, CSV for .csv; anything else is an error naming the two."""
    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise InputError(f"--to {out}: the file's name says its format: .parquet (or .pq) or .csv")
    await store.info(name)  # JournalNotFound, naming it, before any file is made
    tables: list[pa.Table] = []
    read = 0
    low, high = start if start is not None else -(2**63), end if end is not None else 2**63
    async with aclosing(store.read(name)) as pages:
        async for page in pages:
            rows = [(r.seq, r.causation, r.message) for r in page
                    if (kinds is None or type(r.message).__name__ in kinds) and low <= r.message.ts_event < high]
            if rows:
                tables.append(_page_table(rows))
            read += len(page)
            if progress is not None:
                progress(read)
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table(
        {"seq": pa.array([], pa.int64()), "causation": pa.array([], pa.int64()), "kind": pa.array([], pa.string()),
         "ts_event": pa.array([], TIMESTAMP), "ts_init": pa.array([], TIMESTAMP)})
    written = out.with_name(out.name + ".partial")  # the file appears whole or not at all
    try:
        if suffix == ".csv":
            import pyarrow.csv as pa_csv

            pa_csv.write_csv(table, written)
        else:
            import pyarrow.parquet as pq

            pq.write_table(table, written, row_group_size=100_000)
        written.replace(out)
    except OSError as e:
        written.unlink(missing_ok=True)
        raise InputError(f"--to {out}: cannot write: {e.strerror or e}") from e
    counts: dict[str, int] = {}
    for kind in table.column("kind").to_pylist():
        counts[kind] = counts.get(kind, 0) + 1
    return {"journal": name, "file": str(out), "rows": table.num_rows, "columns": table.num_columns,
            "events_read": read, "kinds": dict(sorted(counts.items()))}


def column_names(kinds: Sequence[str]) -> list[str]:
    """The columns an export of these kinds has, in order (docs/journal.md lists them)."""
    return [*COMMON, *(n for n in FIELDS if any(n in FIELDS_OF[k] for k in kinds))]
