"""The writer of one PostgreSQL journal: numbering, group commit, and riding out a database that goes away.

The writer numbers events itself, in memory, at append: the advisory lock it holds guarantees nobody else
writes the journal, so numbers are gap-free and insert order is commit order, and a reader that has seen
sequence number n has seen everything before it. Its task drains the queue and writes each batch with
one binary COPY on an autocommit connection: the COPY is its own transaction, durable when the server
answers it, so a batch costs two round trips, not three with a COMMIT of its own; the rows are formatted
and the COPY driven through libpq directly (adapters/journal/pg_copy.py), the commit cycle being what every
order's durable acknowledgement waits on. A trigger
(migrations/0002) wakes tailing readers with one NOTIFY.

Nothing is dropped. When a write fails, the batch stays in hand and the writer reports the journal
degraded (the runtime halts trading), reconnects with capped exponential backoff, takes the lock again,
asks the database how far the journal got (a COPY whose acknowledgement was lost did commit), and writes
whatever is missing. A write that takes longer than `stall_after` is reported the same way while the
writer keeps waiting; one longer than `write_timeout` is abandoned and retried on a new connection.
Meanwhile events queue in memory up to `queue_max`, and then the trading loop waits (back-pressure).
Another writer taking the journal over while we were away is fatal.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import psycopg
import structlog
from psycopg.types.json import Jsonb

from foxhunt.adapters.journal import pg_partitions as partitions
from foxhunt.adapters.journal.pg import connect, unavailable
from foxhunt.adapters.journal.pg_copy import copy_in, format_rows
from foxhunt.errors import JournalError, JournalLocked, JournalUnavailable
from foxhunt.messages import codec
from foxhunt.messages.base import Message
from foxhunt.ports import JournalWriter

log = structlog.get_logger("foxhunt.journal")

DEAD_HOLDER_WAIT = 10.0  # seconds a restarted writer waits for a killed predecessor's server session to end
LOCK_CLASS = 0x4648  # "FH": first key of the two-key advisory lock; the second is the journal id
NOTIFY_CHANNEL = "foxhunt_events"  # see migrations/0002_notify_trigger.sql
_COLUMNS = ("journal_id", "seq", "kind", "ts_event", "ts_init", "causation", "correlation", "payload")
_COPY_IN = f"COPY events ({', '.join(_COLUMNS)}) FROM STDIN (FORMAT BINARY)".encode()
_SEQ, _KIND, _CAUSATION = 1, 2, 5  # positions in a queued row

HealthHook = Callable[[str | None, int], None]  # (reason it is degraded, or None once recovered; outage ns)
CommitHook = Callable[[list[str], float], None]  # (kinds of the committed events, seconds the write took)


_HOLDING: dict[tuple[str, int], PostgresJournalWriter] = {}  # (DSN, journal id): this process's writer that took it

RELIEVE_EVERY = 100  # appends between two yields to the writer while a full batch waits (docs/benchmarks.md)


@dataclass(frozen=True)
class WriterPolicy:
    batch_max: int = 10_000  # most rows in one COPY (one transaction)
    queue_max: int = 100_000  # most rows waiting in memory before the trading loop must wait
    stall_after: float = 1.0  # seconds one write may take before the journal counts as degraded
    write_timeout: float = 30.0  # seconds after which a write is abandoned and retried on a new connection
    backoff_max: float = 5.0  # longest wait between reconnection attempts
    partition_span: int = 50_000_000  # events per partition range of a journal this writer creates


def group_cut(rows: list[tuple], batch_max: int) -> int:
    """How many queued rows the next batch takes: all of them if they fit, else as many as fit up to the
    start of an input, so an input and the events derived from it always commit together (the journal is
    never left holding an input without its derived events, whatever moment a crash picks). The queue
    itself always ends at a group boundary: the trading loop appends an input and what it derived with
    no await in between. A group larger than batch_max goes whole, in one batch of its own."""
    if len(rows) <= batch_max:
        return len(rows)
    for cut in range(batch_max, 0, -1):
        if rows[cut][_CAUSATION] is None:
            return cut
    for cut in range(batch_max + 1, len(rows)):
        if rows[cut][_CAUSATION] is None:
            return cut
    return len(rows)


class PostgresJournalWriter(JournalWriter):
    def __init__(self, dsn: str, name: str, policy: WriterPolicy) -> None:
        self.name = name
        self.policy = policy
        self.on_health: HealthHook = lambda reason, outage_ns: None
        self.on_commit: CommitHook | None = None
        self.journal_id = 0
        self._span = 1  # the journal's partition span (open() reads it)
        self._ranges_end = 0  # the last seq the partition ranges made so far can hold
        self._dsn = dsn
        self._app = _application_name(os.getpid())
        self._conn: psycopg.AsyncConnection | None = None
        self._abandoned: int | None = None  # the server pid of a session given up mid-write, to end for good
        self._rows: list[tuple] = []
        self._relieve_at = policy.batch_max  # queued rows at which `backlogged` asks the producer to yield
        self._next_seq = 1
        self._committed = 0
        self._flush_to = 0  # the highest sequence number someone awaits in flush()
        self._have_rows = anyio.Event()
        self._committed_event = anyio.Event()
        self._write_started: float | None = None
        self._down_since: float | None = None
        self._failure: BaseException | None = None

    # --- the port --------------------------------------------------------------------------------

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
        elif len(rows) >= self._relieve_at:
            self.backlogged = True
        return seq

    def watch_health(self, hook: HealthHook) -> None:
        self.on_health = hook

    async def relieve(self) -> None:
        await anyio.lowlevel.checkpoint()  # a full batch: let the writer task take it
        while len(self._rows) >= self.policy.queue_max:
            await self._wait_commit()  # back-pressure: the journal sets the pace
        if len(self._rows) >= self.policy.batch_max:  # (else the writer took its batch, and reset the mark)
            # Still a full batch queued: the writer is busy with the one before, and its COPY needs the
            # loop now and then to send the next chunk. Yielding at every append cost a pass of the event
            # loop per event (a third of them, ingesting); yielding a tenth of a batch later left the
            # server idle while 1,000 rows were parsed. RELIEVE_EVERY appends later does neither.
            self._relieve_at = min(len(self._rows) + RELIEVE_EVERY, self.policy.queue_max)
        self.backlogged = False

    async def flush(self) -> None:
        target = self._next_seq - 1
        self._flush_to = max(self._flush_to, target)
        while self._committed < target:
            await self._wait_commit()

    async def _wait_commit(self) -> None:
        if self._failure is not None:
            raise JournalUnavailable(f"journal {self.name!r} writer failed: {self._failure}")
        await self._committed_event.wait()

    # --- opening and claiming ------------------------------------------------------------------------

    async def open(self, config: bytes, config_digest: str, fingerprint: dict[str, str]) -> None:
        """Connect, create the journal if needed, and take it: JournalLocked if another writer holds it."""
        self._conn = await connect(self._dsn, autocommit=True, application_name=self._app)
        conn = self._conn
        try:
            await conn.execute(
                "INSERT INTO journals (name, config, config_digest, fingerprint, partition_span)"
                " VALUES (%s, %s::jsonb, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
                (self.name, config.decode(), config_digest, Jsonb(fingerprint), self.policy.partition_span),
            )
            # the journal keeps the configuration of its first run (what replay builds its kernel from); what
            # later runs may change, and how, is the runtime's business (runtime/daemon.py)
            cur = await conn.execute("SELECT id, partition_span FROM journals WHERE name = %s", (self.name,))
            self.journal_id, self._span = await cur.fetchone()
            last_seq = await self._lock(conn)
            await self._make_ranges(last_seq + 1)
        except psycopg.Error as e:
            raise unavailable(e, self._dsn, f"opening journal {self.name!r}") from e
        self._next_seq = last_seq + 1
        self._committed = last_seq

    async def _lock(self, conn: psycopg.AsyncConnection) -> int:
        """Take the journal's advisory lock on this session; return the journal's last sequence number.
        A holder that is a dead process of this host (a writer killed a moment ago, whose server session
        lives on until the server notices, finishing a COPY it had received whole), or this process's own
        session that a reconnection left behind, is waited for, up to DEAD_HOLDER_WAIT seconds; any other
        holder is refused at once."""
        deadline = time.monotonic() + DEAD_HOLDER_WAIT
        key = (self._dsn, self.journal_id)
        while True:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, self.journal_id))
            (locked,) = await cur.fetchone()
            if locked:
                _HOLDING[key] = self
                break
            holder = await _holder(conn, self.journal_id)
            other = _HOLDING.get(key)  # another writer of this process that holds it is no leftover: no wait
            waiting = holder is None or (_dead_local_writer(holder) and other in (None, self))
            if not (waiting and time.monotonic() < deadline):
                raise JournalLocked(f"journal {self.name!r} is held by another writer: {holder or 'gone meanwhile'}")
            await anyio.sleep(0.05)
        cur = await conn.execute(partitions.LAST_SEQ, {"j": self.journal_id})
        (last_seq,) = await cur.fetchone()
        return last_seq

    async def _make_ranges(self, seq: int) -> None:
        """Create the partition ranges up to the one after `seq`'s: appends never wait for DDL, except
        a batch that outruns them (docs/journal.md)."""
        assert self._conn is not None
        first = partitions.range_index(seq, self._span)
        if self._ranges_end:  # and any between the last one made and this one
            first = min(first, partitions.range_index(self._ranges_end + 1, self._span))
        upto = partitions.range_index(seq, self._span) + 1
        await partitions.create_ranges(self._conn, self.journal_id, self._span, first, upto)
        self._ranges_end = (upto + 1) * self._span

    async def close(self) -> None:
        if _HOLDING.get((self._dsn, self.journal_id)) is self:
            del _HOLDING[(self._dsn, self.journal_id)]
        if self._conn is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5), contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None

    # --- the writer task -------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._have_rows.wait()
                cut = group_cut(self._rows, self.policy.batch_max)
                awaited = self._flush_to - self._rows[0][_SEQ] + 1
                if 0 < awaited < cut and self._rows[awaited][_CAUSATION] is None:
                    # someone awaits a row in the queue (an order, under `before_send`): the batch ends
                    # with it, and what was appended since (market data, an input next) waits for the next
                    cut = awaited
                if cut == len(self._rows):
                    batch, self._rows = self._rows, []
                else:
                    batch = self._rows[:cut]
                    del self._rows[:cut]
                if not self._rows:
                    self._have_rows = anyio.Event()
                self._relieve_at = self.policy.batch_max
                self.backlogged = len(self._rows) >= self.policy.batch_max
                await self._commit(batch)
                self._committed = batch[-1][_SEQ]
                if self._committed + self._span // 5 >= self._ranges_end:  # within a fifth of the last range's end
                    await self._commit_ranges(self._committed + self._span // 5)
                woken, self._committed_event = self._committed_event, anyio.Event()
                woken.set()
        except BaseException as e:
            self._failure = e
            self._committed_event.set()
            raise

    async def watch(self) -> None:
        """Report a write that takes longer than `stall_after` (a slow disk, a lock, a hung server)."""
        while True:
            await anyio.sleep(min(0.05, self.policy.stall_after / 4))
            started = self._write_started
            if started is not None and self._down_since is None:
                waited = time.monotonic() - started
                if waited >= self.policy.stall_after:
                    self._degraded(f"a journal write has not finished after {waited:.1f} s", since=started)

    def watch_commits(self, hook: CommitHook) -> None:
        self.on_commit = hook

    async def _commit(self, batch: list[tuple]) -> None:
        """Make one batch durable, whatever it takes; only a takeover by another writer stops it."""
        delay = 0.05
        while True:
            try:
                started = time.perf_counter()
                await self._write(batch)
                if self.on_commit is not None:
                    self.on_commit([row[_KIND] for row in batch], time.perf_counter() - started)
                break
            except (psycopg.Error, TimeoutError) as e:
                self._degraded(_first_line(e))
            committed = await self._reconnect(delay)
            delay = min(delay * 2, self.policy.backoff_max)
            if committed >= batch[-1][_SEQ]:
                break  # the COPY committed; only its acknowledgement was lost
            if committed != batch[0][_SEQ] - 1:
                raise JournalError(
                    f"journal {self.name!r} ends at seq {committed} but this writer had committed up to"
                    f" {batch[0][_SEQ] - 1}: another writer has written to it"
                )
        if self._down_since is not None:
            outage = time.monotonic() - self._down_since
            self._down_since = None
            log.warning("journal_recovered", journal=self.name, outage_s=round(outage, 3))
            self.on_health(None, int(outage * 1e9))

    async def _commit_ranges(self, seq: int) -> None:
        """Create the ranges ahead like a batch is written: retried through an outage."""
        while True:
            try:
                with anyio.fail_after(self.policy.write_timeout):
                    if self._conn is None:
                        raise psycopg.OperationalError("not connected")
                    await self._make_ranges(seq)
                return
            except (psycopg.Error, TimeoutError) as e:
                self._degraded(_first_line(e))
            await self._reconnect(0.05)

    async def _write(self, batch: list[tuple]) -> None:
        self._write_started = time.monotonic()
        try:
            with anyio.fail_after(self.policy.write_timeout):
                if self._conn is None:
                    raise psycopg.OperationalError("not connected")
                if batch[-1][_SEQ] > self._ranges_end:  # a batch larger than a fifth of the span
                    await self._make_ranges(batch[-1][_SEQ])
                # committed when it returns; the events_notify trigger queues the NOTIFY for followers
                await copy_in(self._conn, _COPY_IN, format_rows(batch))
        finally:
            self._write_started = None

    async def _reconnect(self, delay: float) -> int:
        """Replace the connection, with backoff, until one holds the lock; return the journal's last seq.

        The session given up is ended on the server first (pg_terminate_backend of its own server pid): a
        write abandoned past `write_timeout` leaves it waiting there, holding the journal's lock, and the
        new session would otherwise wait for it in vain. Nothing here ends the process: a failure, even a
        lock held by another writer, is logged and tried again, trading halted and the events kept."""
        if self._conn is not None and not self._conn.closed:
            self._abandoned = self._conn.info.backend_pid
        await self.close()
        while True:
            await anyio.sleep(delay)
            delay = min(delay * 2, self.policy.backoff_max)
            try:
                conn = await connect(self._dsn, autocommit=True, application_name=self._app)
            except JournalUnavailable as e:
                log.warning("journal_reconnect_failed", journal=self.name, error=str(e))
                continue
            try:
                if self._abandoned is not None:  # tried once: a role without the right waits for it instead
                    abandoned, self._abandoned = self._abandoned, None
                    await conn.execute("SELECT pg_terminate_backend(%s)", (abandoned,))
                last_seq = await self._lock(conn)
            except (psycopg.Error, JournalLocked) as e:
                log.warning("journal_reconnect_failed", journal=self.name, error=_first_line(e))
                with contextlib.suppress(psycopg.Error):
                    await conn.close()
                continue
            self._conn = conn
            log.warning("journal_reconnected", journal=self.name, last_seq=last_seq)
            return last_seq

    def _degraded(self, reason: str, since: float | None = None) -> None:
        if self._down_since is not None:
            return
        self._down_since = since if since is not None else time.monotonic()
        log.error("journal_degraded", journal=self.name, reason=reason)
        self.on_health(reason, 0)


async def _holder(conn: psycopg.AsyncConnection, journal_id: int) -> str | None:
    cur = await conn.execute(
        "SELECT a.pid, a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s",
        (LOCK_CLASS, journal_id),
    )
    row = await cur.fetchone()
    if row is None:
        return None  # the session let go of the lock since
    pid, app, started = row
    return f"{app or 'unknown application'} (server pid {pid}, connected since {started:%Y-%m-%d %H:%M:%S %Z})"


def _application_name(pid: int) -> str:
    """What a writer calls its server session (PostgreSQL keeps 63 bytes of it)."""
    return f"foxhunt writer pid={pid} host={socket.gethostname()}"[:63]


def _dead_local_writer(holder: str) -> bool:
    """Whether a holder described by _holder is a foxhunt writer of this host whose process is gone, or
    this process's own earlier session (one a reconnection left behind)."""
    match = re.match(r"foxhunt writer pid=(\d+) ", holder)
    if match is None or holder.split(" (server pid")[0] != _application_name(int(match.group(1))):
        return False  # not a writer, or another host's
    if int(match.group(1)) == os.getpid():
        return True
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else 'no detail'}"
