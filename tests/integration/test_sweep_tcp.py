"""What a sweep on a Ray cluster needs of PostgreSQL (docs/sweeps.md, "On a cluster"): a server on TCP with
password authentication, the DSN naming no password and libpq reading it from PGPASSWORD on each node. Here
a throwaway PostgreSQL of its own listens on 127.0.0.1 with scram-sha-256; a journal is written and swept
through it, and the password is found nowhere: not in the command's output or logs, not in the sweep's
files, not in Ray's logs. Without the password, the command says which server refused it."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import tempfile
from pathlib import Path

import psycopg
import pytest

from foxhunt.adapters.journal.pg_embedded import DATABASE, EmbeddedCluster
from tests.integration.test_cli import foxhunt, ok, summary

pytest.importorskip("ray", reason="foxhunt[sweep] is installed by scripts/test")
pytestmark = pytest.mark.postgres


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tcp_server():
    """A PostgreSQL listening on 127.0.0.1:PORT, role `sweeper` with a password, owner of the database;
    (host, port, password)."""
    root = Path(tempfile.mkdtemp(prefix="fh-tcp-", dir="/tmp"))
    root.chmod(0o755)
    cluster = EmbeddedCluster(root)
    cluster.start()
    password = secrets.token_hex(16)
    try:
        with psycopg.connect(cluster.dsn.replace(f"dbname={DATABASE}", "dbname=postgres"), autocommit=True) as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(psycopg.sql.SQL("CREATE ROLE sweeper LOGIN PASSWORD {}").format(psycopg.sql.Literal(password)))
            conn.execute(f'ALTER DATABASE "{DATABASE}" OWNER TO sweeper')
        port = free_port()
        with (cluster.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {port}\n")
        # the first line that matches decides: initdb's `trust` for local TCP goes, scram-sha-256 instead
        (cluster.data_dir / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
        cluster._pg("pg_ctl", "restart", "-D", str(cluster.data_dir), "-l", str(cluster.log_file), "-w",
                    what="restart the TCP PostgreSQL")
        yield "127.0.0.1", port, password
    finally:
        cluster._pg("pg_ctl", "stop", "-D", str(cluster.data_dir), "-m", "immediate", "-w", check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_a_sweep_reads_a_tcp_server_with_the_password_from_the_environment_and_never_shows_it(
        tcp_server, cli_env, journal_name, tmp_path):
    host, port, password = tcp_server
    dsn = f"host={host} port={port} dbname={DATABASE} user=sweeper sslmode=disable"
    state = tmp_path / "state"
    env = cli_env | {"FOXHUNT_DSN": dsn, "PGPASSWORD": password, "FOXHUNT_STATE_DIR": str(state)}
    said = [ok("db", "migrate", env=env), ok("run", "--journal", journal_name, "--feed", "synthetic:seed=3,n=3000",
                                              "--clock", "feed", env=env)]
    swept = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5,10", "--workers", "2",
                    "--name", "over-tcp", "--json", env=env, timeout=300)
    assert swept.returncode == 0, swept.stderr
    said.append(swept)
    done = json.loads(swept.stdout)
    assert [p["error"] for p in done["points"]] == ["", ""]
    alone = summary("replay", journal_name, "--set", "strategy.ema_cross.fast=10", env=env)
    assert done["points"][1]["metrics"][f"state_digest.{journal_name}"] == alone["state_digest"]
    for process in said:
        assert password not in process.stdout + process.stderr
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.parent.name == "over-tcp" or "over-tcp" in p.parts for p in files)  # Tune's experiment files
    ray_logs = Path("/tmp/ray/session_latest/logs")
    for path in [*files, *(ray_logs.rglob("*") if ray_logs.exists() else [])]:
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert password.encode() not in path.read_bytes(), path

    refused = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5", "--name", "no-password",
                      env=env | {"PGPASSWORD": "", "PGPASSFILE": str(tmp_path / "none")})
    assert refused.returncode == 2
    assert f"{host}" in refused.stderr and "password" in refused.stderr, refused.stderr
