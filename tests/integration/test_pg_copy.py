"""The journal writer's binary COPY through libpq (adapters/journal/pg_copy.py), against the real PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from foxhunt.adapters.journal.pg_copy import copy_in, format_rows

pytestmark = pytest.mark.postgres

TABLE = "pg_copy_test"
COPY = f"COPY {TABLE} FROM STDIN (FORMAT BINARY)".encode()


@pytest.fixture
async def conn(pg_dsn):
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (journal_id bigint NOT NULL, seq bigint NOT NULL,"
            " kind text NOT NULL, ts_event bigint NOT NULL, ts_init bigint NOT NULL, causation bigint,"
            " correlation bigint, payload bytea NOT NULL, PRIMARY KEY (journal_id, seq))"
        )
        yield conn
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as other:  # `conn` may be gone
        await other.execute(f"DROP TABLE {TABLE}")


def rows(first: int, n: int) -> list[tuple]:
    return [
        (7, seq, "QuoteTick" if seq % 3 else "Ordér", -seq, 2**62 + seq, None if seq % 2 else seq - 1,
         None if seq % 5 else 2**63 - 1, bytes(range(seq % 256)) + b"\x00\xff")
        for seq in range(first, first + n)
    ]


async def test_rows_arrive_as_they_were_sent_whatever_the_chunking(conn):
    sent = rows(1, 2_345)
    await copy_in(conn, COPY, format_rows(sent, chunk=1000))  # three pieces: 1000, 1000, 345 and the trailer
    cur = await conn.execute(f"SELECT * FROM {TABLE} ORDER BY seq")
    assert await cur.fetchall() == sent


async def test_an_empty_batch_copies_nothing(conn):
    await copy_in(conn, COPY, format_rows([]))
    cur = await conn.execute(f"SELECT count(*) FROM {TABLE}")
    assert await cur.fetchone() == (0,)


async def test_a_server_error_raises_its_psycopg_class_and_leaves_the_connection_usable(conn):
    await copy_in(conn, COPY, format_rows(rows(1, 10)))
    with pytest.raises(psycopg.errors.UniqueViolation, match="duplicate key"):
        await copy_in(conn, COPY, format_rows(rows(5, 10)))  # 5 to 9 are there: the whole COPY is refused
    cur = await conn.execute(f"SELECT count(*), max(seq) FROM {TABLE}")
    assert await cur.fetchone() == (10, 10)
    await copy_in(conn, COPY, format_rows(rows(11, 3)))
    cur = await conn.execute(f"SELECT count(*) FROM {TABLE}")
    assert await cur.fetchone() == (13,)


async def test_a_statement_that_is_not_a_copy_in_is_an_error(conn):
    with pytest.raises(psycopg.errors.UndefinedTable, match="no_such_table"):
        await copy_in(conn, b"COPY no_such_table FROM STDIN (FORMAT BINARY)", format_rows(rows(1, 1)))
    with pytest.raises(psycopg.OperationalError, match="COPY_IN"):
        await copy_in(conn, b"SELECT 1", format_rows(rows(1, 1)))
    cur = await conn.execute("SELECT 2")
    assert await cur.fetchone() == (2,)


async def test_a_connection_closed_underneath_raises_operational_error(conn, pg_dsn):
    (pid,) = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as other:
        await other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(psycopg.OperationalError):
        await copy_in(conn, COPY, format_rows(rows(1, 1)))
