"""Nothing is lost when the database goes away or stalls: trading halts, events wait, the journal resumes
gap-free. Against the session's real PostgreSQL, which these tests stop and lock on purpose."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time

import anyio
import psycopg
import pytest

from foxhunt.adapters.journal.pg_writer import WriterPolicy
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from tests.fakes import quote

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
META = dict(config=b"{}", config_digest="d", fingerprint={})


def journal_facts(dsn: str, name: str) -> tuple[int, int, list[str]]:
    """(number of events, highest seq, kinds in order)."""
    with psycopg.connect(dsn) as conn:
        (jid,) = conn.execute("SELECT id FROM journals WHERE name = %s", (name,)).fetchone()
        rows = conn.execute("SELECT seq, kind FROM events WHERE journal_id = %s ORDER BY seq", (jid,)).fetchall()
    return len(rows), rows[-1][0] if rows else 0, [kind for _, kind in rows]


def wait_for_events(dsn: str, name: str, at_least: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if journal_facts(dsn, name)[0] >= at_least:
                return
        except (psycopg.Error, TypeError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"journal {name} never reached {at_least} events")


def test_the_database_going_away_halts_trading_and_the_journal_resumes_gap_free(
    cluster, pg_dsn, cli_env, journal_name, tmp_path
):
    cmd = [sys.executable, "-m", "foxhunt"]
    daemon = subprocess.Popen(
        [*cmd, "run", "--journal", journal_name, "--feed", "synthetic:seed=1,n=1000000000", "--duration", "10",
         "--json"],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    tail = None
    try:
        wait_for_events(pg_dsn, journal_name, 2000)
        with (tmp_path / "followed.txt").open("w") as followed_file:  # the follower's copy stays open
            tail = subprocess.Popen([*cmd, "journal", "tail", journal_name, "-n", "100000000", "--follow"],
                                    env=cli_env, stdout=followed_file, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 30  # the follower is connected and following before the database goes
        while not (tmp_path / "followed.txt").read_text():
            assert time.monotonic() < deadline and tail.poll() is None, "the follower did not start"
            time.sleep(0.1)
        cluster.stop(mode="immediate")
        time.sleep(3)
        cluster.start()
        out, err = daemon.communicate(timeout=90)
    except BaseException:
        for process in (daemon, tail):
            if process is not None:
                process.kill()
        raise
    assert daemon.returncode == 0, err
    summary = json.loads(out)
    count, last_seq, kinds = journal_facts(pg_dsn, journal_name)
    assert count == last_seq == summary["last_seq"]  # gap-free, and everything the daemon appended is there
    assert kinds[-1] == "RunStopped"
    degraded, recovered = kinds.index("JournalDegraded"), kinds.index("JournalRecovered")
    assert degraded < recovered
    assert "journal_degraded" in err and "journal_reconnected" in err
    lines = subprocess.run([*cmd, "journal", "show", journal_name, "--from", str(degraded + 1), "--limit", "5"],
                           env=cli_env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert "\tTradingStateChanged\t" in lines[1] and '"state":"HALTED"' in lines[1]
    verify = subprocess.run([*cmd, "replay", journal_name, "--verify", "--json"], env=cli_env, capture_output=True,
                            text=True)
    assert verify.returncode == 0, verify.stderr
    time.sleep(2)  # the follower catches up with the last batch
    tail.terminate()
    tail.wait(timeout=30)
    followed = [int(line.split("\t")[0]) for line in (tmp_path / "followed.txt").read_text().splitlines()]
    assert followed == list(range(1, last_seq + 1))  # across the outage: nothing missed, nothing twice


@contextlib.asynccontextmanager
async def stalled_writer(pg_dsn: str, name: str, policy: WriterPolicy, queued: int):
    """A writer of `name` with one event committed, then `queued` more appended while a lock on `events` holds
    every write back; yields it and the health reports it made. On the way out the lock is let go, and
    everything must then commit."""
    health: list[tuple[str | None, int]] = []
    async with PostgresJournalStore(pg_dsn, policy).writer(name, **META) as writer:
        writer.watch_health(lambda reason, outage: health.append((reason, outage)))
        writer.append(quote(1, "1.1", "1.2"))
        await writer.flush()
        async with await psycopg.AsyncConnection.connect(pg_dsn) as locker:
            await locker.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")  # held until rollback
            for i in range(queued):
                if writer.backlogged:
                    await writer.relieve()
                writer.append(quote(2 + i, "1.1", "1.2"))
            yield writer, health
            await locker.rollback()
        with anyio.fail_after(15):
            await writer.flush()


async def test_a_stalled_write_is_reported_and_nothing_is_lost(pg_dsn, journal_name):
    policy = WriterPolicy(batch_max=50, queue_max=500, stall_after=0.3)
    async with stalled_writer(pg_dsn, journal_name, policy, 200) as (_, health):
        await anyio.sleep(1.0)
        assert [reason is not None for reason, _ in health] == [True]
        assert "has not finished after" in health[0][0]
    assert health[-1][0] is None and health[-1][1] >= 700_000_000  # recovered, after about a second
    count, last_seq, _ = await anyio.to_thread.run_sync(journal_facts, pg_dsn, journal_name)
    assert count == last_seq == 201


async def test_a_write_stalled_past_its_timeout_many_times_over_loses_nothing_and_ends_nothing(
    pg_dsn, journal_name, monkeypatch
):
    """The review's fault: a write abandoned after write_timeout left its server session waiting on the lock
    and holding the journal's advisory lock; the new session waited for it (its own pid) and gave up, and the
    writer died with what it held. Now the writer ends its abandoned session and tries again, as often as
    it takes."""
    from foxhunt.adapters.journal import pg_writer

    monkeypatch.setattr(pg_writer, "DEAD_HOLDER_WAIT", 1.0)  # the wait that ran out, made short
    policy = WriterPolicy(batch_max=50, queue_max=500, stall_after=0.2, write_timeout=0.5, backoff_max=0.2)
    async with stalled_writer(pg_dsn, journal_name, policy, 100) as (_, health):
        await anyio.sleep(4.0)  # eight write timeouts, and four times the wait for the lock's holder
        async with await psycopg.AsyncConnection.connect(pg_dsn) as watcher:
            cur = await watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                                        ("foxhunt writer pid=%",))
            (sessions,) = await cur.fetchone()
        assert sessions <= 2  # the abandoned ones were ended, not left to pile up
    assert [reason is None for reason, _ in health] == [False, True]  # degraded once, then recovered
    count, last_seq, _ = await anyio.to_thread.run_sync(journal_facts, pg_dsn, journal_name)
    assert count == last_seq == 101


@pytest.mark.parametrize("holder_alive", [False, True])
async def test_a_restart_waits_for_a_killed_writers_lingering_session_but_not_for_a_live_writer(
    pg_dsn, journal_name, holder_alive
):
    from foxhunt.adapters.journal.pg_writer import LOCK_CLASS, _application_name
    from foxhunt.errors import JournalLocked

    store = PostgresJournalStore(pg_dsn)
    async with store.writer(journal_name, config=b"{}", config_digest="d", fingerprint={}) as writer:
        writer.append(quote(1, "1.1", "1.1002"))
    holder_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    if not holder_alive:
        holder_proc.kill()
        holder_proc.wait()
    try:
        # the session of the writer process `holder_proc` was: the server has not noticed it died yet
        lingering = psycopg.connect(pg_dsn, autocommit=True, application_name=_application_name(holder_proc.pid))
        jid = lingering.execute("SELECT id FROM journals WHERE name = %s", (journal_name,)).fetchone()[0]
        lingering.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, jid))
        started = time.monotonic()
        with anyio.fail_after(8):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, lambda: (time.sleep(1.0), lingering.close()))
                if holder_alive:
                    with pytest.raises(JournalLocked, match=f"foxhunt writer pid={holder_proc.pid} "):
                        async with store.writer(journal_name, config=b"{}", config_digest="d", fingerprint={}):
                            pass
                    assert time.monotonic() - started < 0.9  # refused at once
                else:
                    async with store.writer(journal_name, config=b"{}", config_digest="d", fingerprint={}) as w:
                        assert w.append(quote(2, "1.1", "1.1002")) == 2
                    assert time.monotonic() - started >= 0.9  # it waited for the session to end
    finally:
        holder_proc.kill()
        holder_proc.wait()
