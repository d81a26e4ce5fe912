"""Market data feeds, chosen by a spec string: `synthetic:seed=7,n=100000`, `csv:PATH[,symbol=X]`, or `none`
(no feed: market data comes from the venue, e.g. Interactive Brokers, and the run lasts until stopped)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.market import Instrument
from foxhunt.ports import Clock


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """'csv:/a/b.csv,symbol=EURUSD' -> ('csv', '/a/b.csv', {'symbol': 'EURUSD'})."""
    kind, sep, rest = spec.partition(":")
    if not sep and kind not in ("synthetic", "none"):
        raise InputError(f"feed spec {spec!r}: expected 'synthetic:k=v,...' or 'csv:PATH[,k=v...]'")
    parts = [p for p in rest.split(",") if p] if rest else []
    target = ""
    if kind == "csv":
        if not parts or "=" in parts[0]:
            raise InputError(f"feed spec {spec!r}: csv needs a path, as in csv:data/ticks.csv")
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
    raise InputError(f"feed spec {spec!r}: unknown feed kind {kind!r}; known: synthetic, csv, none")
