"""Reading a PostgreSQL journal in order: keyset pages by sequence number, one query ahead.

A page is `seq >= next ORDER BY seq LIMIT n`, fetched in binary so psycopg builds the rows in C. The
reader runs its connection in pipeline mode and sends the query for the next page before it decodes the
current one, so the server executes it meanwhile; a page of `PAGE_ROWS` rows (about 150 kB) fits in the
socket's buffer, so by the time the loop wants it, receiving it is a copy, not a wait. All of it happens
on the event loop's thread: a fetching thread of its own spent most of its time waiting for the GIL
that the decoding held (docs/benchmarks.md, "Replay read path").

Each page ends with a Sync before it is handed on. In pipeline mode the statements up to a Sync make
one implicit transaction, so this bounds the reader's transaction (and its locks on the partitions it
read, which the writer's partition DDL waits for) to the decoding of one page, however long the caller
keeps it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg

from foxhunt.messages import codec
from foxhunt.ports import Record

PAGE_QUERY = "SELECT seq, causation, payload FROM events WHERE journal_id = %s AND seq >= %s ORDER BY seq LIMIT %s"
PAGE_ROWS = 1_000  # the store's page: twice as many overflow the socket's buffer, half as many pay more per query


def to_records(rows: list[tuple], decode_derived: bool = True) -> list[Record]:
    """(seq, causation, payload) rows as Records; derived events stay undecoded unless asked for."""
    decode = codec.decode
    if decode_derived:
        return [Record(s, c, decode(p), p) for s, c, p in rows]
    return [Record(s, c, None if c else decode(p), p) for s, c, p in rows]


async def read_pages(
    conn: psycopg.AsyncConnection, journal_id: int, from_seq: int, limit: int | None, page_size: int,
    decode_derived: bool = True,
) -> AsyncIterator[list[Record]]:
    """Records of the journal from `from_seq` on (at most `limit`), as committed when each page is read,
    in pages of at most `page_size`; ends at the first page shorter than it asked for. Raises psycopg
    errors, for the store to translate."""
    remaining = limit
    size = page_size if remaining is None else min(page_size, remaining)
    async with conn.pipeline() as pipeline:
        asked = await _ask(conn, journal_id, from_seq, size) if size > 0 else None
        await pipeline.sync()
        while asked is not None:
            rows = await asked.fetchall()
            asked = None
            if remaining is not None:
                remaining -= len(rows)
            if len(rows) == size and (remaining is None or remaining > 0):
                size = page_size if remaining is None else min(page_size, remaining)
                asked = await _ask(conn, journal_id, rows[-1][0] + 1, size)  # executed while this page decodes
            records = to_records(rows, decode_derived)
            await pipeline.sync()  # ends the page's implicit transaction; receives the next page
            if records:
                yield records


async def _ask(conn: psycopg.AsyncConnection, journal_id: int, seq: int, size: int) -> psycopg.AsyncCursor:
    cur = conn.cursor(binary=True)
    await cur.execute(PAGE_QUERY, (journal_id, seq, size))
    return cur
