"""Crash-only: kill -9 the daemon at random moments while the feed runs and orders flow, twenty times
over one journal. After every kill the journal must be gap-free, every order that reached the venue must
be in it, it must verify, and the state the next start rebuilds must equal the state replay computes. Every
start saves a kernel snapshot after its recovery, so from the third start on the state is rebuilt from the
snapshot the start before saved, and the inputs after it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import psycopg
import pytest

from foxhunt.messages import codec
from tests.integration.test_durability import journal_facts

pytestmark = [pytest.mark.postgres, pytest.mark.faults]
KILLS = 14


def submitted_order_ids(dsn: str, name: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT e.payload FROM events e JOIN journals j ON j.id = e.journal_id"
            " WHERE j.name = %s AND e.kind = 'OrderSubmitted'", (name,),
        ).fetchall()
    return {codec.decode(payload).order_id for (payload,) in rows}


def recovered(log_path) -> dict:
    """The restarted daemon's `recovered` log line ({} if it logged none)."""
    for line in log_path.read_text().splitlines():
        if line.startswith("{") and json.loads(line).get("event") == "recovered":
            return json.loads(line)
    return {}


def test_kill_minus_nine_at_random_moments_loses_nothing(cli_env, pg_dsn, journal_name, tmp_path):
    rng = random.Random(20261201)
    wire = tmp_path / "wire.jsonl"
    env = {**cli_env, "FOXHUNT_RUN__WIRE_LOG": str(wire), "FOXHUNT_JOURNAL__SNAPSHOT_AFTER": "1"}
    replayed_digest, last_seq = None, 0
    for cycle in range(KILLS):
        log_path = tmp_path / f"run-{cycle}.log"
        with log_path.open("w") as log:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--log-level", "info",
                 "--feed", f"synthetic:seed={cycle},n=1000000000"],
                env=env, stdout=subprocess.DEVNULL, stderr=log,
            )
            try:
                deadline = time.monotonic() + 60
                while journal_facts_or_zero(pg_dsn, journal_name) < last_seq + 300:
                    assert daemon.poll() is None, log_path.read_text()[-2000:]
                    assert time.monotonic() < deadline, "the daemon did not start trading"
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.0, 0.5))
            finally:
                daemon.kill()  # SIGKILL: no cleanup, no final flush
                daemon.wait()
                server_session_gone(pg_dsn, daemon.pid)
        if replayed_digest is not None:
            digest = recovered(log_path).get("state_digest")
            assert digest == replayed_digest, f"cycle {cycle}: restart rebuilt another state"
        if cycle >= 2:
            assert recovered(log_path).get("from_snapshot"), f"cycle {cycle}: the start did not use its snapshot"
        count, last_seq, kinds = journal_facts(pg_dsn, journal_name)
        assert count == last_seq, f"cycle {cycle}: gaps in the journal"
        sent = {json.loads(line)["order_id"] for line in wire.read_text().splitlines() if '"SubmitOrder"' in line}
        assert sent, "no order reached the venue: the test would prove nothing"
        missing = sent - submitted_order_ids(pg_dsn, journal_name)
        assert not missing, f"cycle {cycle}: orders reached the venue that the journal lacks: {sorted(missing)[:5]}"
        verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                                env=cli_env, capture_output=True, text=True)
        assert verify.returncode == 0, f"cycle {cycle}: {verify.stderr}"
        replayed_digest = json.loads(verify.stdout)["state_digest"]
    assert kinds.count("RunStarted") == KILLS


def server_session_gone(dsn: str, pid: int) -> None:
    """Wait for the killed writer's server session to end: a COPY it had sent whole still commits (it is its
    own transaction), and the session holds the journal's lock until the server notices the client is gone."""
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                           (f"foxhunt writer pid={pid} %",)).fetchone()[0]:
            assert time.monotonic() < deadline, "the killed daemon's server session lingers"
            time.sleep(0.02)


def journal_facts_or_zero(dsn: str, name: str) -> int:
    try:
        return journal_facts(dsn, name)[0]
    except (TypeError, psycopg.Error):  # the journal does not exist yet
        return 0
