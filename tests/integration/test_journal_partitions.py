"""Partitioned journals (migrations/0003): ranges made ahead of the writer, reads that touch only the ranges
they need, and whole old ranges archived to checksummed files and restored, against a real PostgreSQL."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import uuid
from contextlib import aclosing
from pathlib import Path

import psycopg
import psycopg.conninfo
import pytest
from psycopg import sql

from foxhunt.adapters.journal import pg_partitions as partitions
from foxhunt.adapters.journal.pg_writer import WriterPolicy
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.errors import JournalArchived, JournalError
from tests.fakes import quote

pytestmark = pytest.mark.postgres

META = dict(config=b"{}", config_digest="d", fingerprint={})
SPAN = 100


async def write(store: PostgresJournalStore, name: str, n: int, start_ts: int = 1) -> list[int]:
    async with store.writer(name, **META) as writer:
        seqs = []
        for i in range(n):
            if writer.backlogged:
                await writer.relieve()
            seqs.append(writer.append(quote(start_ts + i, "1.1", "1.1002")))
        await writer.flush()
    return seqs


async def read(store: PostgresJournalStore, name: str, from_seq: int = 1) -> list:
    async with aclosing(store.read(name, from_seq)) as pages:
        return [record async for page in pages for record in page]


def ranges(dsn: str, name: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        (journal_id,) = conn.execute("SELECT id FROM journals WHERE name = %s", (name,)).fetchone()
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = %s::regclass ORDER BY c.relname", (f"events_j{journal_id}",)
        ).fetchall()
    return sorted((r[0] for r in rows), key=lambda t: int(t.rsplit("_r", 1)[1]))


async def test_ranges_are_made_ahead_of_the_writer_and_reads_touch_only_what_they_need(pg_dsn, journal_name):
    store = PostgresJournalStore(pg_dsn, WriterPolicy(batch_max=30, queue_max=60, partition_span=SPAN), page_size=40)
    assert await write(store, journal_name, 350) == list(range(1, 351))
    made = ranges(pg_dsn, journal_name)
    assert made[:4] == [f"{made[0].rsplit('_r', 1)[0]}_r{k}" for k in range(4)]
    assert len(made) == 5  # 301-350 in r3, and r4 made ahead: 350 is within a fifth of r3's end
    assert [r.seq for r in await read(store, journal_name)] == list(range(1, 351))
    with psycopg.connect(pg_dsn) as conn:
        (journal_id,) = conn.execute("SELECT id FROM journals WHERE name = %s", (journal_name,)).fetchone()
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT seq, causation, payload FROM events WHERE journal_id = %s AND seq >= 150"
            " AND seq < 190 ORDER BY seq", (journal_id,)))
    assert f"events_j{journal_id}_r1" in plan and "_r0" not in plan and "_r2" not in plan, plan


async def test_a_batch_larger_than_the_span_gets_every_range_it_needs(pg_dsn, journal_name):
    store = PostgresJournalStore(pg_dsn, WriterPolicy(batch_max=1000, queue_max=2000, partition_span=10))
    assert await write(store, journal_name, 555) == list(range(1, 556))
    assert len(ranges(pg_dsn, journal_name)) >= 56
    assert [r.seq for r in await read(store, journal_name)] == list(range(1, 556))


@pytest.mark.faults
async def test_old_ranges_are_archived_to_checksummed_files_and_restored(pg_dsn, journal_name, tmp_path):
    store = PostgresJournalStore(pg_dsn, WriterPolicy(batch_max=30, queue_max=60, partition_span=SPAN), page_size=40)
    await write(store, journal_name, 350)
    before = await read(store, journal_name)

    done = partitions.archive(pg_dsn, journal_name, 250, tmp_path / "archive")
    assert [(a.from_seq, a.to_seq) for a in done] == [(1, 100), (101, 200)]  # 201-300 ends after 250: kept
    for a in done:
        assert hashlib.sha256(Path(a.location).read_bytes()).hexdigest() == a.sha256
    assert len(ranges(pg_dsn, journal_name)) == 3

    with pytest.raises(JournalArchived, match=r"events 1 to 200 are archived .*foxhunt journal restore"):
        await read(store, journal_name)
    assert [r.seq for r in await read(store, journal_name, 201)] == list(range(201, 351))
    assert (await store.info(journal_name)).last_seq == 350
    assert await write(store, journal_name, 10, start_ts=1000) == list(range(351, 361))  # the writer goes on
    assert partitions.archive(pg_dsn, journal_name, 250, tmp_path / "archive") == []  # nothing more to do

    files = [Path(a.location) for a in done]
    good = files[1].read_bytes()
    files[1].write_bytes(good[:-10] + b"\x00" * 10)  # the second file damaged on disk
    with pytest.raises(JournalError, match="does not match its recorded SHA-256"):
        partitions.restore(pg_dsn, journal_name)
    with pytest.raises(JournalArchived, match="events 101 to 200"):  # the first came back, the second did not
        await read(store, journal_name)
    files[1].write_bytes(good)
    assert [(a.from_seq, a.to_seq) for a in partitions.restore(pg_dsn, journal_name)] == [(101, 200)]
    after = await read(store, journal_name)
    assert [r.seq for r in after] == list(range(1, 361))
    assert [(r.seq, r.causation, r.payload) for r in after[:350]] == [(r.seq, r.causation, r.payload) for r in before]


@pytest.mark.faults
def test_archive_and_restore_from_the_command_line_and_a_restart_from_a_snapshot_in_between(
    cli_env, pg_dsn, journal_name, tmp_path
):
    env = {**cli_env, "FOXHUNT_JOURNAL__PARTITION_SPAN": "500"}

    def foxhunt(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "foxhunt", *args], env=env, capture_output=True, text=True,
                              timeout=300)

    def snapshot_code(code: str | None) -> str:
        """The code digest of the journal's snapshot, after setting it to `code`."""
        mine = "journal_id = (SELECT id FROM journals WHERE name = %s)"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            if code is not None:
                conn.execute(f"UPDATE snapshots SET code = %s WHERE {mine}", (code, journal_name))
            return conn.execute(f"SELECT code FROM snapshots WHERE {mine}", (journal_name,)).fetchone()[0]

    run = foxhunt("run", "--journal", journal_name, "--feed", "synthetic:seed=3,n=2000", "--clock", "feed")
    assert run.returncode == 0, run.stderr
    refused = foxhunt("journal", "archive", journal_name, "--through", "1000", "--to", str(tmp_path))
    assert refused.returncode == 2 and f"foxhunt journal snapshot {journal_name}" in refused.stderr, refused.stderr
    snap = foxhunt("journal", "snapshot", journal_name)
    assert snap.returncode == 0 and snap.stdout.startswith(f"snapshot\tseq {last_seq(pg_dsn, journal_name)}\t"), snap
    (tmp_path / "a-file").write_text("")
    nowhere = foxhunt("journal", "archive", journal_name, "--through", "1000", "--to", str(tmp_path / "a-file" / "x"))
    assert nowhere.returncode == 2 and f"archiving journal '{journal_name}' into" in nowhere.stderr, nowhere.stderr
    (tmp_path / "a-file").unlink()
    archived = foxhunt("journal", "archive", journal_name, "--through", "1000", "--to", str(tmp_path))
    assert archived.returncode == 0, archived.stderr
    assert [line.split("\t")[1] for line in archived.stdout.splitlines()] == ["1-500", "501-1000"]
    replay = foxhunt("replay", journal_name, "--verify")
    assert replay.returncode == 2 and "events 1 to 1000 are archived" in replay.stderr, replay.stderr
    bad = foxhunt("journal", "archive", journal_name, "--through", "x", "--to", str(tmp_path))
    assert bad.returncode == 2 and "--through" in bad.stderr

    # the daemon starts on the archived journal from its snapshot, and only from a snapshot it can use
    good = snapshot_code(None)
    snapshot_code("other")
    stale = foxhunt("run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=500", "--clock", "feed")
    assert stale.returncode == 2 and "events 1 to 1000 are archived" in stale.stderr, stale.stderr
    assert "snapshot at seq" in stale.stderr and "taken by other code" in stale.stderr, stale.stderr
    snapshot_code(good)
    before = last_seq(pg_dsn, journal_name)
    again = foxhunt("run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=500", "--clock", "feed")
    assert again.returncode == 0, again.stderr
    assert last_seq(pg_dsn, journal_name) > before + 500

    restored = foxhunt("journal", "restore", journal_name)
    assert restored.returncode == 0 and len(restored.stdout.splitlines()) == 2, restored.stderr
    replay = foxhunt("replay", journal_name, "--verify")  # the run restored from the snapshot too, byte for byte
    assert replay.returncode == 0, replay.stderr
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".pgcopy", ".pgcopy"]  # kept: the operator's to delete


def test_archiving_while_the_daemon_writes_loses_nothing(cli_env, pg_dsn, journal_name, tmp_path):
    env = {**cli_env, "FOXHUNT_JOURNAL__PARTITION_SPAN": "500"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=12000,rate=3000"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while last_seq(pg_dsn, journal_name) < 1600:
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read() if daemon.poll() else "slow"
            time.sleep(0.05)
        done = partitions.archive(pg_dsn, journal_name, 1500, tmp_path)  # the daemon goes on writing meanwhile
        assert [(a.from_seq, a.to_seq) for a in done] == [(1, 500), (501, 1000), (1001, 1500)]
        assert daemon.wait(timeout=60) == 0, daemon.stderr.read()
    finally:
        daemon.kill()
        daemon.wait()
        daemon.stderr.close()
    assert last_seq(pg_dsn, journal_name) > 12000
    partitions.restore(pg_dsn, journal_name)
    with psycopg.connect(pg_dsn) as conn:
        seqs = [r[0] for r in conn.execute(
            "SELECT e.seq FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s ORDER BY e.seq",
            (journal_name,))]
    assert seqs == list(range(1, len(seqs) + 1))  # gap-free across the archive and the restore
    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stderr


def last_seq(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT max(e.seq) FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s",
                           (name,)).fetchone()
    return row[0] or 0


async def test_the_partitioning_migration_moves_an_existing_journal_intact(pg_dsn):
    """A database at migration 0002 with events in it, as a deployment had before 0003, migrated."""
    from foxhunt.adapters.journal.pg import migrate, migration_files

    name = f"premig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
    try:
        with psycopg.connect(dsn) as conn:
            conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                         " applied_at timestamptz NOT NULL DEFAULT now())")
            for version, path in migration_files()[:2]:
                conn.execute(path.read_text())
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, path.name))
            ids = [conn.execute("INSERT INTO journals (name, config, config_digest, fingerprint) VALUES"
                                " (%s, '{}', 'd', '{}') RETURNING id", (j,)).fetchone()[0] for j in ("a", "b")]
            rows = [(jid, seq, "QuoteTick", seq, seq, None, None, bytes([seq % 256]) * 10)
                    for jid, n in zip(ids, (1500, 7), strict=True) for seq in range(1, n + 1)]
            with conn.cursor().copy("COPY events FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        assert await migrate(dsn) == [path.name for _, path in migration_files()[2:]]
        with psycopg.connect(dsn) as conn:
            after = conn.execute("SELECT * FROM events ORDER BY journal_id, seq").fetchall()
            parted = conn.execute("SELECT count(*) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
                                  " WHERE c.relname = 'events'").fetchone()[0]
            spans = conn.execute("SELECT partition_span FROM journals ORDER BY id").fetchall()
        assert [tuple(r) for r in after] == rows
        assert parted == 1 and spans == [(50_000_000,), (50_000_000,)]
        store = PostgresJournalStore(dsn, WriterPolicy())
        assert await write(store, "a", 3, start_ts=2000) == [1501, 1502, 1503]  # and the writer goes on
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
