"""Market data feeds, chosen by a spec string: `synthetic:seed=7,n=100000`, a file (`csv:PATH[,k=v...]`,
`parquet:PATH[,k=v...]`, `arrow:PATH[,k=v...]`, or the file's path alone, its kind told by its extension), or
`none` (no feed: market data comes from the venue, e.g. Interactive Brokers, and the run lasts until stopped).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Literal

from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.market import Instrument
from foxhunt.ports import Clock

FILE_KINDS = ("csv", "parquet", "arrow")
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow"}


def file_spec(path: str) -> str:
    """The spec of a data file given by its path alone: parquet for .parquet/.pq, arrow for .arrow/.feather/
    .ipc, csv for anything else."""
    return f"{_EXTENSIONS.get(os.path.splitext(path)[1].lower(), 'csv')}:{path}"


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """'csv:/a/b.csv,symbol=EURUSD' -> ('csv', '/a/b.csv', {'symbol': 'EURUSD'}); a path alone that names a
    file -> its kind by `file_spec`."""
    kind, sep, rest = spec.partition(":")
    if not sep and kind not in ("synthetic", "none"):
        if os.path.isfile(spec):
            return parse_spec(file_spec(spec))
        raise InputError(f"feed spec {spec!r}: expected 'synthetic:k=v,...', 'csv:PATH[,k=v...]' (or parquet:,"
                         " arrow:), a data file's path, or none")
    parts = [p for p in rest.split(",") if p] if rest else []
    target = ""
    if kind in FILE_KINDS:
        if not parts or "=" in parts[0]:
            raise InputError(f"feed spec {spec!r}: {kind} needs a path, as in {kind}:data/ticks.{kind}")
        target, parts = parts[0], parts[1:]
    options = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq:
            raise InputError(f"feed spec {spec!r}: option {part!r} is not key=value")
        options[key.strip()] = value.strip()
    return kind, target, options


def is_live(spec: str) -> bool:
    """Whether the feed brings market data as it happens (`none`: the venue's; a synthetic feed with a
    `rate`, paced in real time), rather than a record read as fast as it can be."""
    kind, _, options = parse_spec(spec)
    return kind == "none" or (kind == "synthetic" and "rate" in options)


def open_feed(
    spec: str,
    instruments: dict[str, Instrument],
    clock: Clock,
    on_bad_row: Literal["error", "skip"] = "error",
) -> Iterator[Input] | None:
    from foxhunt.adapters.feeds import csv_feed, synthetic

    kind, target, options = parse_spec(spec)
    if kind == "none":
        return None
    if kind == "synthetic":
        return synthetic.SyntheticFeed.from_options(options, instruments, clock)
    if kind == "csv":
        return csv_feed.CsvFeed.from_options(target, options, instruments, clock, on_bad_row)
    if kind in ("parquet", "arrow"):
        from foxhunt.adapters.feeds import columnar  # pyarrow: loaded by the feeds that read its files

        return columnar.ColumnarFeed.from_options(kind, target, options, instruments, clock, on_bad_row)
    raise InputError(f"feed spec {spec!r}: unknown feed kind {kind!r}; known: synthetic, {', '.join(FILE_KINDS)},"
                     " none")
