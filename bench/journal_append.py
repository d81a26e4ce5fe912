"""Sustained journal append through the daemon's writer, against the raw limit in the same run: a bare
psycopg binary COPY of the same rows into the same table, in batches of the same size, durable commits.

    .venv/bin/python bench/journal_append.py [--events 300000] [--batch 10000] [--repeats 3]

The writer's figure includes encoding each message (the bare COPY gets its rows pre-encoded) and the
trading loop's side of appending (numbering, queueing, back-pressure). Peak memory (max RSS) is reported
to show the queue stays bounded. Uses FOXHUNT_DSN or the embedded cluster in FOXHUNT_STATE_DIR.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import resource
import statistics
import time
import uuid

import anyio
import psycopg
from psycopg.adapt import PyFormat

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal import pg_partitions as partitions
from foxhunt.adapters.journal.pg_writer import _COPY_IN, WriterPolicy
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.messages import codec
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime.clock import EventClock

META = dict(config=b"{}", config_digest="bench", fingerprint={})
TYPES = ["int8", "int8", "text", "int8", "int8", "int8", "int8", "bytea"]  # the columns of _COPY_IN


def use_fast_bytea_copy(conn: psycopg.Connection) -> None:
    """Make binary COPY with `set_types([... "bytea"])` dump bytes with psycopg's C dumper: `set_types`
    finds dumpers by type OID, and for bytea that returns the last one registered, psycopg's DB-API
    `Binary` dumper, written in Python. Registering the C bytes dumper again puts it last."""
    conn.adapters.register_dumper(bytes, conn.adapters.get_dumper(bytes, PyFormat.BINARY))


def bare_copy(dsn: str, rows: list[tuple], batch: int) -> float:
    with psycopg.connect(dsn) as conn:
        use_fast_bytea_copy(conn)  # the best a bare psycopg COPY can do
        started = time.perf_counter()
        for i in range(0, len(rows), batch):
            with conn.cursor() as cur, cur.copy(_COPY_IN) as copy:
                copy.set_types(TYPES)
                for row in rows[i : i + batch]:
                    copy.write_row(row)
            conn.commit()
        return time.perf_counter() - started


async def through_writer(dsn: str, messages: list, batch: int) -> float:
    store = PostgresJournalStore(dsn, WriterPolicy(batch_max=batch, queue_max=10 * batch))
    async with store.writer(f"bench-append-{uuid.uuid4().hex[:8]}", **META) as writer:
        started = time.perf_counter()
        for msg in messages:
            if writer.backlogged:
                await writer.relieve()
            writer.append(msg)
        await writer.flush()
        return time.perf_counter() - started


async def make_ranges(dsn: str, journal_id: int, last_seq: int) -> None:
    """The partitions the bare COPY's rows go to (the writer makes its own)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        span = WriterPolicy().partition_span
        await partitions.create_ranges(conn, journal_id, span, 0, partitions.range_index(last_seq, span))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cfg = config.load(None)
    dsn = bootstrap.resolve_dsn(cfg)
    anyio.run(bootstrap.open_store, cfg, dsn)  # migrations
    eurusd = cfg.trading().build_instruments()["EURUSD"]
    messages = list(SyntheticFeed(7, args.events, eurusd, parse_fixed("1.1"), EventClock()))
    with psycopg.connect(dsn) as conn:
        (journal_id,) = conn.execute(
            "INSERT INTO journals (name, config, config_digest, fingerprint) VALUES (%s, '{}', 'bench', '{}')"
            " RETURNING id", (f"bench-bare-{uuid.uuid4().hex[:8]}",),
        ).fetchone()
    anyio.run(make_ranges, dsn, journal_id, args.repeats * len(messages))
    rows = [(journal_id, i + 1, type(m).__name__, m.ts_event, m.ts_init, None, None, codec.encode(m))
            for i, m in enumerate(messages)]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bare, writer = [], []
    for r in range(args.repeats):
        bare.append(bare_copy(dsn, [(journal_id, seq + r * len(rows), *rest) for _, seq, *rest in rows], args.batch))
        writer.append(anyio.run(through_writer, dsn, messages, args.batch, backend_options={"use_uvloop": True}))
    n = len(messages)
    bare_rate, writer_rate = n / statistics.median(bare), n / statistics.median(writer)
    print(f"{n} events per run, batches of {args.batch}, {args.repeats} repeats, medians:")
    print(f"  bare psycopg binary COPY   {bare_rate:12,.0f} rows/s")
    print(f"  foxhunt journal writer     {writer_rate:12,.0f} events/s  ({writer_rate / bare_rate:.0%} of bare COPY)")
    print("  writer / bare, run by run (each pair back to back):",
          ", ".join(f"{b / w:.0%}" for b, w in zip(bare, writer, strict=True)))
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    print(f"  peak RSS growth during the runs: {growth:.0f} MiB (the rows and messages themselves are held before)")


if __name__ == "__main__":
    main()
