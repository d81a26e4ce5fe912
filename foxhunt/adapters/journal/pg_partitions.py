"""The journal's partitions (migrations/0003): creating ranges, archiving old ones, restoring them.

`events` is partitioned by journal (`events_j<id>`), and each journal's partition by ranges of sequence
numbers of the journal's `partition_span` (`events_j<id>_r<k>` holds seq k*span+1 to (k+1)*span). Keyset
reads by position touch one or two ranges, whatever the journal's length.

Archiving moves whole ranges the journal has filled out of the database: the range's rows are copied, in
sequence order, to a file (PostgreSQL's binary COPY format) that is synced to disk and checksummed, and
only then, in one transaction, is the range recorded in `journal_archives` and its partition detached and
dropped. Restoring checks the checksum, recreates the partition, copies the rows back and checks them,
and deletes the catalog row, again in one transaction. A journal whose first ranges are archived can
still be written and followed; reading it from before its first retained event raises JournalArchived,
naming the file and the command that brings it back, rather than silently starting later.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from foxhunt.adapters.journal.pg import unavailable
from foxhunt.errors import JournalArchived, JournalError, JournalNotFound


@dataclass(frozen=True)
class Archive:
    from_seq: int
    to_seq: int
    location: str
    sha256: str


def range_index(seq: int, span: int) -> int:
    return (seq - 1) // span


def _journal_table(journal_id: int) -> sql.Identifier:
    return sql.Identifier(f"events_j{journal_id}")


def _range_table(journal_id: int, index: int) -> sql.Identifier:
    return sql.Identifier(f"events_j{journal_id}_r{index}")


def _create_range(journal_id: int, span: int, index: int) -> sql.Composed:
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})").format(
        _range_table(journal_id, index), _journal_table(journal_id),
        sql.Literal(index * span + 1), sql.Literal((index + 1) * span + 1),
    )


async def create_ranges(conn: psycopg.AsyncConnection, journal_id: int, span: int, first: int, last: int) -> None:
    """Make sure the journal's partition and its ranges `first` to `last` exist (autocommit connection:
    each statement is its own short transaction)."""
    await conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF events FOR VALUES IN ({}) PARTITION BY RANGE (seq)").format(
            _journal_table(journal_id), sql.Literal(journal_id)
        )
    )
    for index in range(first, last + 1):
        await conn.execute(_create_range(journal_id, span, index))


# A journal's last sequence number, in the database or archived (a journal archived up to its end goes on
# after it); one parameter, the journal id
LAST_SEQ = (
    "SELECT greatest((SELECT coalesce(max(seq), 0) FROM events WHERE journal_id = %(j)s),"
    " (SELECT coalesce(max(to_seq), 0) FROM journal_archives WHERE journal_id = %(j)s))"
)


def refuse_archived(name: str, from_seq: int, archives: list[Archive]) -> None:
    """JournalArchived if reading from `from_seq` would need an archived range."""
    needed = [a for a in archives if a.to_seq >= from_seq]
    if needed:
        first, last = needed[0], needed[-1]
        raise JournalArchived(
            f"journal {name!r}: events {first.from_seq} to {last.to_seq} are archived (first file: {first.location});"
            f" read from seq {last.to_seq + 1} on, or bring them back with `foxhunt journal restore {name}`"
        )


_ARCHIVES = "SELECT from_seq, to_seq, location, sha256 FROM journal_archives WHERE journal_id = %s ORDER BY from_seq"


def archives(conn: psycopg.Connection, journal_id: int) -> list[Archive]:
    return [Archive(*row) for row in conn.execute(_ARCHIVES, (journal_id,)).fetchall()]


async def refuse_archived_async(conn: psycopg.AsyncConnection, name: str, journal_id: int, from_seq: int) -> None:
    cur = await conn.execute(_ARCHIVES, (journal_id,))
    refuse_archived(name, from_seq, [Archive(*row) for row in await cur.fetchall()])


def _journal(conn: psycopg.Connection, name: str) -> tuple[int, int, int]:
    """(id, partition span, last seq) of journal `name`."""
    row = conn.execute("SELECT id, partition_span FROM journals WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise JournalNotFound(f"no journal named {name!r}")
    journal_id, span = row
    (last,) = conn.execute(LAST_SEQ, {"j": journal_id}).fetchone()
    return journal_id, span, last


def archive(dsn: str, name: str, through_seq: int, directory: Path,
            progress: Callable[[int, int], None] | None = None) -> list[Archive]:
    """Archive every whole range of journal `name` that ends at or before `through_seq` and that the
    journal has filled (never the range it is writing); return what was archived. Safe while a writer runs:
    a filled range is never written again (detaching one holds the writer up for milliseconds). `progress`
    hears (events archived, events to archive) after each range."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return _archive(dsn, name, through_seq, directory, progress)
    except psycopg.Error as e:
        raise unavailable(e, dsn, f"archiving journal {name!r}") from e
    except OSError as e:  # nothing was dropped: a range goes only once its file is written and synced
        raise JournalError(f"archiving journal {name!r} into {directory}: {e}") from None


def _archive(dsn: str, name: str, through_seq: int, directory: Path,
             progress: Callable[[int, int], None] | None) -> list[Archive]:
    done: list[Archive] = []
    with psycopg.connect(dsn, autocommit=True, application_name="foxhunt archive") as conn:
        journal_id, span, last = _journal(conn, name)
        earlier = archives(conn, journal_id)
        retained_from = earlier[-1].to_seq + 1 if earlier else 1
        # whole ranges only, and never the one holding the last event: the writer may still be filling it
        end = min(through_seq, last - 1)
        ranges = range(range_index(retained_from, span), range_index(end + 1, span))
        whole = [i for i in ranges if (i + 1) * span <= end]
        for index in ranges:
            lo, hi = index * span + 1, (index + 1) * span  # inclusive
            if hi > end:
                break
            path = directory / f"{name}.j{journal_id}.{lo:012d}-{hi:012d}.pgcopy"
            digest, rows = _copy_out(conn, journal_id, index, path)
            if rows != span:
                path.unlink()
                raise JournalError(f"journal {name!r}: range {lo} to {hi} holds {rows} events, not {span}: not archived")
            entry = Archive(lo, hi, str(path.resolve()), digest)
            with conn.transaction():
                conn.execute(
                    "INSERT INTO journal_archives (journal_id, from_seq, to_seq, location, sha256)"
                    " VALUES (%s, %s, %s, %s, %s)", (journal_id, lo, hi, entry.location, digest)
                )
                conn.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(
                    _journal_table(journal_id), _range_table(journal_id, index)))
                conn.execute(sql.SQL("DROP TABLE {}").format(_range_table(journal_id, index)))
            done.append(entry)
            if progress is not None:
                progress(len(done) * span, len(whole) * span)
    return done


def _copy_out(conn: psycopg.Connection, journal_id: int, index: int, path: Path) -> tuple[str, int]:
    """The range's rows, in seq order, to `path`, synced; return (sha256, rows)."""
    digest, rows = hashlib.sha256(), 0
    query = sql.SQL("COPY (SELECT * FROM {} ORDER BY seq) TO STDOUT (FORMAT BINARY)").format(
        _range_table(journal_id, index))
    with open(path, "wb") as out, conn.cursor() as cur:
        with cur.copy(query) as copy:
            for chunk in copy:
                out.write(chunk)
                digest.update(chunk)
        rows = cur.rowcount
        out.flush()
        os.fsync(out.fileno())
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the file's name is durable too
    finally:
        os.close(dir_fd)
    return digest.hexdigest(), rows


def restore(dsn: str, name: str, progress: Callable[[int, int], None] | None = None) -> list[Archive]:
    """Bring every archived range of journal `name` back into the database, each in one transaction, after
    checking its file against the recorded checksum; return what was restored. `progress` hears (events
    restored, events to restore) after each range."""
    try:
        return _restore(dsn, name, progress)
    except psycopg.Error as e:
        raise unavailable(e, dsn, f"restoring journal {name!r}") from e


def _restore(dsn: str, name: str, progress: Callable[[int, int], None] | None) -> list[Archive]:
    done: list[Archive] = []
    with psycopg.connect(dsn, autocommit=True, application_name="foxhunt restore") as conn:
        journal_id, span, _ = _journal(conn, name)
        entries = archives(conn, journal_id)
        total = sum(e.to_seq - e.from_seq + 1 for e in entries)
        for entry in entries:
            path = Path(entry.location)
            try:
                data = path.read_bytes()
            except OSError as e:
                raise JournalError(f"journal {name!r}: archive of events {entry.from_seq} to {entry.to_seq}: {e}") from None
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise JournalError(f"journal {name!r}: archive {path} does not match its recorded SHA-256: not restored")
            index = range_index(entry.from_seq, span)
            with conn.transaction():
                conn.execute(_create_range(journal_id, span, index))
                with conn.cursor() as cur:
                    with cur.copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(_range_table(journal_id, index))) as copy:
                        copy.write(data)
                    rows = cur.rowcount
                if rows != entry.to_seq - entry.from_seq + 1:
                    raise JournalError(f"journal {name!r}: archive {path} holds {rows} events, not"
                                       f" {entry.to_seq - entry.from_seq + 1}: not restored")
                conn.execute("DELETE FROM journal_archives WHERE journal_id = %s AND from_seq = %s",
                             (journal_id, entry.from_seq))
            done.append(entry)
            if progress is not None:
                progress(sum(e.to_seq - e.from_seq + 1 for e in done), total)
    return done
