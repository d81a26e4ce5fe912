"""`foxhunt ingest` on a large CSV: rows per second from file to committed journal.

Writes a quotes CSV (TrueFX layout: `timestamp,bid,ask`, ISO timestamps) of `--rows` seeded synthetic
quotes to a temporary directory, then times `foxhunt ingest` on it in a subprocess, `--repeats` times,
and reports the median. Target (issue 3): at least 200,000 rows per second.

    .venv/bin/python bench/ingest.py [--rows 1000000] [--repeats 3]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp()) / "eurusd-quotes.csv"
    write_csv(path, args.rows)
    rates = []
    for _ in range(args.repeats):
        out = subprocess.run(
            [sys.executable, "-m", "foxhunt", "ingest", str(path), "--journal", f"bench-ingest-{uuid.uuid4().hex[:8]}",
             "--json"], check=True, capture_output=True, text=True,
        ).stdout
        rates.append(json.loads(out)["rows_per_second"])
    print(f"{args.rows} rows ({path.stat().st_size / 2**20:.0f} MiB), {args.repeats} repeats: median"
          f" {statistics.median(rates):,.0f} rows/s (each: {', '.join(f'{r:,}' for r in rates)})")


if __name__ == "__main__":
    main()
