"""`foxhunt ingest` of a large file: rows per second from file to committed journal.

Writes `--rows` seeded synthetic quotes to a temporary directory as a quotes CSV (TrueFX layout:
`timestamp,bid,ask`, ISO timestamps) and, with `--formats csv,parquet`, as a Parquet file of the same
quotes (a `timestamp` column of Arrow's timestamp type in UTC, float64 `bid` and `ask`, row groups of
100,000: what pandas and polars write), then times `foxhunt ingest` on each in a subprocess, the formats
alternating, `--repeats` times, and reports each format's median. Targets: the CSV at least 200,000 rows
per second (issue 3); the Parquet at least the CSV's rate (issue 24).

    .venv/bin/python bench/ingest.py [--rows 1000000] [--repeats 3] [--formats csv,parquet]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.messages.base import format_fixed, parse_fixed
from foxhunt.runtime.clock import EventClock


def write_csv(path: Path, rows: int) -> None:
    eurusd = config.load(None, env={}).trading().build_instruments()["EURUSD"]
    with path.open("w") as f:
        f.write("timestamp,bid,ask\n")
        for q in SyntheticFeed(11, rows, eurusd, parse_fixed("1.10000"), EventClock()):
            stamp = dt.datetime.fromtimestamp(q.ts_event / 1e9, dt.UTC).isoformat(sep=" ", timespec="milliseconds")
            f.write(f"{stamp},{format_fixed(q.bid)},{format_fixed(q.ask)}\n")


def write_parquet(csv_path: Path, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    table = pa_csv.read_csv(csv_path, convert_options=pa_csv.ConvertOptions(
        column_types={"timestamp": pa.timestamp("ms", "UTC"), "bid": pa.float64(), "ask": pa.float64()}))
    pq.write_table(table, path, row_group_size=100_000)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--formats", default="csv", help="csv, parquet or csv,parquet (alternating)")
    args = parser.parse_args()
    formats = args.formats.split(",")
    directory = Path(tempfile.mkdtemp())
    paths = {"csv": directory / "eurusd-quotes.csv", "parquet": directory / "eurusd-quotes.parquet"}
    write_csv(paths["csv"], args.rows)
    if "parquet" in formats:
        write_parquet(paths["csv"], paths["parquet"])
    rates: dict[str, list[int]] = {f: [] for f in formats}
    for _ in range(args.repeats):
        for fmt in formats:
            out = subprocess.run(
                [sys.executable, "-m", "foxhunt", "ingest", str(paths[fmt]), "--journal",
                 f"bench-ingest-{uuid.uuid4().hex[:8]}", "--json"], check=True, capture_output=True, text=True,
            ).stdout
            result = json.loads(out)
            assert result["rows"] == args.rows and result["gaps"] == 0, result
            rates[fmt].append(result["rows_per_second"])
    for fmt, each in rates.items():
        print(f"{fmt:>8}: {args.rows} rows ({paths[fmt].stat().st_size / 2**20:.0f} MiB), {args.repeats} repeats:"
              f" median {statistics.median(each):,.0f} rows/s (each: {', '.join(f'{r:,}' for r in each)})")
    if len(rates) == 2:
        print(f"parquet / csv: {statistics.median(rates['parquet']) / statistics.median(rates['csv']):.2f}")


if __name__ == "__main__":
    main()
