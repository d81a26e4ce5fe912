"""The PostgreSQL journal store: opening writers (see pg_writer.py), listing, reading and tailing.

Reads are keyset pages by sequence number, each asked for while the one before decodes (pg_reader.py),
so memory stays flat however long the journal; tailing wakes on the writer's NOTIFY after each committed
batch and reconnects, from where it was, when the database goes away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import anyio
import psycopg
import structlog
from psycopg import sql

from foxhunt.adapters.journal import pg_partitions as partitions
from foxhunt.adapters.journal.pg import connect, unavailable
from foxhunt.adapters.journal.pg_reader import PAGE_ROWS, read_pages
from foxhunt.adapters.journal.pg_writer import NOTIFY_CHANNEL, PostgresJournalWriter, WriterPolicy
from foxhunt.errors import JournalNotFound, JournalUnavailable
from foxhunt.ports import JournalInfo, JournalStore, Record, Snapshot

log = structlog.get_logger("foxhunt.journal")


class PostgresJournalStore(JournalStore):
    def __init__(self, dsn: str, policy: WriterPolicy = WriterPolicy(), *, page_size: int = PAGE_ROWS) -> None:
        self.dsn = dsn
        self.policy = policy
        self.page_size = page_size

    @asynccontextmanager
    async def writer(self, name: str, *, config: bytes, config_digest: str, fingerprint: dict[str, str]):
        writer = PostgresJournalWriter(self.dsn, name, self.policy)
        try:
            await writer.open(config, config_digest, fingerprint)
            async with anyio.create_task_group() as tg:
                await tg.start(writer.run)
                tg.start_soon(writer.watch)
                yield writer
                await writer.flush()
                tg.cancel_scope.cancel()
        finally:
            await writer.close()

    async def _readable_from(self, conn: psycopg.AsyncConnection, name: str, seq: int) -> int:
        """The id of journal `name`, whose events from `seq` on are to be read: JournalNotFound, or
        JournalArchived when some of them are archived."""
        cur = await conn.execute("SELECT id FROM journals WHERE name = %s", (name,))
        row = await cur.fetchone()
        if row is None:
            raise JournalNotFound(f"no journal named {name!r}")
        await partitions.refuse_archived_async(conn, name, row[0], seq)
        return row[0]

    _INFO = (
        "SELECT j.name, j.id, to_char(j.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
        " j.config_digest, greatest((SELECT coalesce(max(seq), 0) FROM events e WHERE e.journal_id = j.id),"
        " (SELECT coalesce(max(to_seq), 0) FROM journal_archives a WHERE a.journal_id = j.id)) FROM journals j"
    )

    async def info(self, name: str) -> JournalInfo:
        rows = await self._query(self._INFO + " WHERE j.name = %s", (name,))
        if not rows:
            raise JournalNotFound(f"no journal named {name!r}")
        return _info(rows[0])

    async def list(self) -> list[JournalInfo]:
        return [_info(row) for row in await self._query(self._INFO + " ORDER BY j.name", ())]

    async def _query(self, query: str, params: tuple, doing: str = "reading the journal list") -> list[tuple]:
        conn = await connect(self.dsn, autocommit=True)
        try:
            async with conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall()
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, doing) from e

    async def read(
        self, name: str, from_seq: int = 1, limit: int | None = None, *, decode_derived: bool = True
    ) -> AsyncIterator[list[Record]]:
        conn = await connect(self.dsn, autocommit=True, application_name="foxhunt reader")
        try:
            async with conn:
                journal_id = await self._readable_from(conn, name, from_seq)
                pages = read_pages(conn, journal_id, from_seq, limit, self.page_size, decode_derived)
                async with aclosing(pages):
                    async for page in pages:
                        yield page
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, f"reading journal {name!r}") from e

    async def tail(self, name: str, from_seq: int = 1, *, decode_derived: bool = True) -> AsyncIterator[list[Record]]:
        """Follow a journal: catch up by position, then wait for the writer's NOTIFY after each batch.
        Listening starts before each catch-up read, so a batch committed in between still wakes us; the
        one-second timeout is a safety net, not the mechanism. When the database goes away, reconnect
        with backoff and go on from the next sequence number: nothing is missed or seen twice."""
        seq, delay = from_seq, 0.05
        while True:
            try:
                conn = await connect(self.dsn, autocommit=True, application_name="foxhunt tail")
                async with conn:
                    journal_id = await self._readable_from(conn, name, seq)
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
                    delay = 0.05
                    while True:
                        pages = read_pages(conn, journal_id, seq, None, self.page_size, decode_derived)
                        async with aclosing(pages):
                            async for page in pages:
                                seq = page[-1].seq + 1
                                yield page
                        async for _ in conn.notifies(timeout=1.0, stop_after=1):
                            pass
            except (psycopg.Error, JournalUnavailable) as e:
                log.warning("tail_reconnecting", journal=name, next_seq=seq, error=str(e).strip()[:200])
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)

    _SNAPSHOT_COLUMNS = "seq, inputs, kernel, code, config, state_digest, sha256, state"

    async def snapshots(self, name: str) -> list[Snapshot]:
        await self.info(name)  # JournalNotFound
        rows = await self._query(
            f"SELECT {self._SNAPSHOT_COLUMNS}, to_char(taken_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
            " FROM snapshots WHERE journal_id = (SELECT id FROM journals WHERE name = %s) ORDER BY seq DESC",
            (name,), f"reading the snapshots of journal {name!r}",
        )
        return [Snapshot(*row[:4], bytes(row[4]), *row[5:7], bytes(row[7]), row[8]) for row in rows]

    async def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        conn = await connect(self.dsn, autocommit=False, application_name="foxhunt snapshot")
        try:
            async with conn:
                cur = await conn.execute("SELECT id FROM journals WHERE name = %s", (name,))
                row = await cur.fetchone()
                if row is None:
                    raise JournalNotFound(f"no journal named {name!r}")
                await conn.execute(
                    f"INSERT INTO snapshots (journal_id, {self._SNAPSHOT_COLUMNS})"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (journal_id, seq) DO UPDATE SET"
                    " inputs = excluded.inputs, kernel = excluded.kernel, code = excluded.code,"
                    " config = excluded.config, state_digest = excluded.state_digest, sha256 = excluded.sha256,"
                    " state = excluded.state, taken_at = now()",
                    (row[0], *snapshot[:8]),
                )
                await conn.execute(
                    "DELETE FROM snapshots WHERE journal_id = %s AND seq NOT IN"
                    " (SELECT seq FROM snapshots WHERE journal_id = %s ORDER BY seq DESC LIMIT %s)",
                    (row[0], row[0], keep),
                )
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, f"saving a snapshot of journal {name!r}") from e


def _info(row: tuple) -> JournalInfo:
    name, journal_id, created, digest, last_seq = row
    return JournalInfo(name, journal_id, created, digest, last_seq, last_seq)
