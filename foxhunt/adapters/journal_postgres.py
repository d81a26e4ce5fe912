"""The PostgreSQL journal: one writer per journal under an advisory lock, group commit by binary COPY.

The writer assigns sequence numbers itself, in memory, at append: the lock guarantees nobody else
writes the journal, so numbers are gap-free and insert order is commit order, and a reader that has seen
sequence number n has seen everything before it. A writer task drains the queue and writes each batch
with one COPY and one COMMIT, then wakes tailing readers with one NOTIFY per batch.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from foxhunt.adapters.pg import connect, unavailable
from foxhunt.errors import JournalLocked, JournalMismatch, JournalNotFound, JournalUnavailable
from foxhunt.messages import codec
from foxhunt.messages.base import Message
from foxhunt.ports import PAGE_SIZE, JournalInfo, JournalStore, JournalWriter, Record

LOCK_CLASS = 0x4648  # "FH": first key of the two-key advisory lock; the second is the journal id
NOTIFY_CHANNEL = "foxhunt_events"
_COLUMNS = ("journal_id", "seq", "kind", "ts_event", "ts_init", "causation", "correlation", "payload")
_TYPES = ("int8", "int8", "text", "int8", "int8", "int8", "int8", "bytea")
_COPY_IN = f"COPY events ({', '.join(_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
_PAGE = "SELECT seq, causation, payload FROM events WHERE journal_id = %s AND seq >= %s ORDER BY seq LIMIT %s"


def _group_cut(rows: list[tuple], batch_max: int) -> int:
    """How many queued rows the next batch takes: all of them if they fit, else as many as fit up to the
    start of an input, so an input and the events derived from it always commit together (the journal is
    never left holding an input without its derived events, whatever moment a crash picks). The queue
    itself always ends at a group boundary: the trading loop appends an input and what it derived with
    no await in between. A group larger than batch_max goes whole, in one batch of its own."""
    if len(rows) <= batch_max:
        return len(rows)
    for cut in range(batch_max, 0, -1):
        if rows[cut][5] is None:  # causation: rows[cut] is an input, a group starts there
            return cut
    for cut in range(batch_max + 1, len(rows)):
        if rows[cut][5] is None:
            return cut
    return len(rows)


class PostgresJournalWriter(JournalWriter):
    def __init__(
        self, conn: psycopg.AsyncConnection, dsn: str, name: str, journal_id: int, last_seq: int,
        batch_max: int, queue_max: int,
    ) -> None:
        self.name = name
        self.journal_id = journal_id
        self._conn = conn
        self._dsn = dsn
        self._batch_max = batch_max
        self._queue_max = queue_max
        self._rows: list[tuple] = []
        self._next_seq = last_seq + 1
        self._committed = last_seq
        self._have_rows = anyio.Event()
        self._committed_event = anyio.Event()
        self._failure: BaseException | None = None

    @property
    def last_seq(self) -> int:
        return self._next_seq - 1

    @property
    def committed_seq(self) -> int:
        return self._committed

    def append(self, message: Message, causation: int | None = None) -> int:
        seq = self._next_seq
        self._next_seq = seq + 1
        rows = self._rows
        rows.append(
            (self.journal_id, seq, type(message).__name__, message.ts_event, message.ts_init, causation, None,
             codec.encode(message))
        )
        if len(rows) == 1:
            self._have_rows.set()
        elif len(rows) >= self._batch_max:
            self.backlogged = True
        return seq

    async def relieve(self) -> None:
        await anyio.lowlevel.checkpoint()  # a full batch: let the writer task take it
        while len(self._rows) >= self._queue_max:
            await self._wait_commit()  # back-pressure: the journal sets the pace
        self.backlogged = len(self._rows) >= self._batch_max

    async def flush(self) -> None:
        target = self._next_seq - 1
        while self._committed < target:
            await self._wait_commit()

    async def _wait_commit(self) -> None:
        if self._failure is not None:
            raise JournalUnavailable(f"journal {self.name!r} writer failed: {self._failure}")
        await self._committed_event.wait()

    async def run(self, *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._have_rows.wait()
                cut = _group_cut(self._rows, self._batch_max)
                if cut == len(self._rows):
                    batch, self._rows = self._rows, []
                else:
                    batch = self._rows[:cut]
                    del self._rows[:cut]
                if not self._rows:
                    self._have_rows = anyio.Event()
                self.backlogged = len(self._rows) >= self._batch_max
                await self._write(batch)
                self._committed = batch[-1][1]
                woken, self._committed_event = self._committed_event, anyio.Event()
                woken.set()
        except BaseException as e:
            self._failure = e
            self._committed_event.set()
            raise

    async def _write(self, batch: list[tuple]) -> None:
        try:
            async with self._conn.cursor() as cur:
                async with cur.copy(_COPY_IN) as copy:
                    copy.set_types(list(_TYPES))
                    for row in batch:
                        await copy.write_row(row)
                await cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{self.journal_id}:{batch[-1][1]}"))
            await self._conn.commit()
        except psycopg.Error as e:
            raise unavailable(e, self._dsn, f"appending to journal {self.name!r}") from e


class PostgresJournalStore(JournalStore):
    def __init__(
        self, dsn: str, *, batch_max: int = 10_000, queue_max: int = 100_000, page_size: int = PAGE_SIZE
    ) -> None:
        self.dsn = dsn
        self.page_size = page_size
        self.batch_max = batch_max
        self.queue_max = queue_max

    @asynccontextmanager
    async def writer(self, name: str, *, config: bytes, config_digest: str, fingerprint: dict[str, str]):
        app = f"foxhunt writer pid={os.getpid()} host={socket.gethostname()}"[:63]
        conn = await connect(self.dsn, application_name=app)
        try:
            journal_id, last_seq = await self._claim(conn, name, config, config_digest, fingerprint)
            writer = PostgresJournalWriter(
                conn, self.dsn, name, journal_id, last_seq, self.batch_max, self.queue_max
            )
            async with anyio.create_task_group() as tg:
                await tg.start(writer.run)
                yield writer
                await writer.flush()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await conn.close()

    async def _claim(
        self, conn: psycopg.AsyncConnection, name: str, config: bytes, digest: str, fingerprint: dict[str, str]
    ) -> tuple[int, int]:
        try:
            await conn.execute(
                "INSERT INTO journals (name, config, config_digest, fingerprint) VALUES (%s, %s::jsonb, %s, %s)"
                " ON CONFLICT (name) DO NOTHING",
                (name, config.decode(), digest, Jsonb(fingerprint)),
            )
            cur = await conn.execute("SELECT id, config_digest FROM journals WHERE name = %s", (name,))
            journal_id, recorded_digest = await cur.fetchone()
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, journal_id))
            (locked,) = await cur.fetchone()
            if not locked:
                raise JournalLocked(f"journal {name!r} is held by another writer: {await self._holder(conn, journal_id)}")
            if recorded_digest != digest:
                raise JournalMismatch(
                    f"journal {name!r} was recorded with config digest {recorded_digest}, this run's is "
                    f"{digest}: use a new journal for a new configuration"
                )
            cur = await conn.execute("SELECT coalesce(max(seq), 0) FROM events WHERE journal_id = %s", (journal_id,))
            (last_seq,) = await cur.fetchone()
            await conn.commit()
            return journal_id, last_seq
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, f"opening journal {name!r}") from e

    async def _holder(self, conn: psycopg.AsyncConnection, journal_id: int) -> str:
        cur = await conn.execute(
            "SELECT a.pid, a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
            (LOCK_CLASS, journal_id),
        )
        row = await cur.fetchone()
        if row is None:
            return "a session that has since gone"
        pid, app, started = row
        return f"{app or 'unknown application'} (server pid {pid}, connected since {started:%Y-%m-%d %H:%M:%S %Z})"

    async def _journal_id(self, conn: psycopg.AsyncConnection, name: str) -> int:
        cur = await conn.execute("SELECT id FROM journals WHERE name = %s", (name,))
        row = await cur.fetchone()
        if row is None:
            raise JournalNotFound(f"no journal named {name!r}")
        return row[0]

    _INFO = (
        "SELECT j.name, j.id, to_char(j.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
        " j.config_digest, coalesce((SELECT max(seq) FROM events e WHERE e.journal_id = j.id), 0) FROM journals j"
    )

    async def info(self, name: str) -> JournalInfo:
        rows = await self._query(self._INFO + " WHERE j.name = %s", (name,))
        if not rows:
            raise JournalNotFound(f"no journal named {name!r}")
        return _info(rows[0])

    async def list(self) -> list[JournalInfo]:
        return [_info(row) for row in await self._query(self._INFO + " ORDER BY j.name", ())]

    async def _query(self, query: str, params: tuple) -> list[tuple]:
        conn = await connect(self.dsn, autocommit=True)
        try:
            async with conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall()
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, "reading the journal list") from e

    async def read(
        self, name: str, from_seq: int = 1, limit: int | None = None, *, decode_derived: bool = True
    ) -> AsyncIterator[list[Record]]:
        conn = await connect(self.dsn, autocommit=True, application_name="foxhunt reader")
        try:
            async with conn:
                journal_id = await self._journal_id(conn, name)
                async for page in self._pages(conn, journal_id, from_seq, limit, decode_derived):
                    yield page
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, f"reading journal {name!r}") from e

    async def _pages(
        self, conn: psycopg.AsyncConnection, journal_id: int, from_seq: int, limit: int | None,
        decode_derived: bool = True,
    ) -> AsyncIterator[list[Record]]:
        """Keyset pages by sequence number, fetched in binary (psycopg builds the rows in C)."""
        decode = codec.decode
        seq, remaining = from_seq, limit
        async with conn.cursor(binary=True) as cur:
            while remaining is None or remaining > 0:
                size = self.page_size if remaining is None else min(self.page_size, remaining)
                await cur.execute(_PAGE, (journal_id, seq, size))
                rows = await cur.fetchall()
                if rows:
                    if decode_derived:
                        yield [Record(s, c, decode(p), p) for s, c, p in rows]
                    else:
                        yield [Record(s, c, None if c else decode(p), p) for s, c, p in rows]
                    seq = rows[-1][0] + 1
                if len(rows) < size:
                    return
                if remaining is not None:
                    remaining -= len(rows)

    async def tail(self, name: str, from_seq: int = 1) -> AsyncIterator[list[Record]]:
        """Follow a journal: catch up by position, then wait for the writer's NOTIFY after each batch.
        Listening starts before each catch-up read, so a batch committed in between still wakes us."""
        conn = await connect(self.dsn, autocommit=True, application_name="foxhunt tail")
        try:
            async with conn:
                journal_id = await self._journal_id(conn, name)
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
                seq = from_seq
                while True:
                    async for page in self._pages(conn, journal_id, seq, None):
                        seq = page[-1].seq + 1
                        yield page
                    async for _ in conn.notifies(timeout=1.0, stop_after=1):
                        pass
        except psycopg.Error as e:
            raise unavailable(e, self.dsn, f"tailing journal {name!r}") from e


def _info(row: tuple) -> JournalInfo:
    name, journal_id, created, digest, last_seq = row
    return JournalInfo(name, journal_id, created, digest, last_seq, last_seq)
