"""The web gateway when its database goes away and comes back, on a PostgreSQL of the test's own (so the
session's cluster stays up for the other tests): requests are answered 503 with the server named, never a
crash or a 500, and once the database is back the same gateway answers again; a gateway started against a
database that is not there exits with a clear error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from foxhunt.adapters.journal.pg_embedded import EmbeddedCluster
from tests.integration.test_web import free_port, token, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.faults]


@pytest.fixture
def own_cluster():
    root = Path(tempfile.mkdtemp(prefix="fh-webdb-", dir="/tmp"))
    root.chmod(0o755)  # as root, the cluster runs as the foxhunt user, who must enter it
    cluster = EmbeddedCluster(root)
    cluster.start()
    try:
        yield root, cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def test_the_gateway_answers_503_while_its_database_is_down_and_recovers(own_cluster):
    root, cluster = own_cluster
    env = dict(os.environ, FOXHUNT_STATE_DIR=str(root))
    env.pop("FOXHUNT_DSN", None)
    config = root / "foxhunt.toml"
    port = free_port()
    config.write_text(f'[web]\nlisten = "127.0.0.1:{port}"\n')
    alice = token(env, config, "alice", "read")
    with (root / "web.log").open("w") as log:
        web = subprocess.Popen([sys.executable, "-m", "foxhunt", "web", "serve", "--config", str(config),
                                "--log-level", "info"], env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            assert web.poll() is None, (root / "web.log").read_text()
            try:
                return httpx.get(f"{base}/api/journals", headers={"authorization": f"Bearer {alice}"}, timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until("the gateway answering", up, 60)
        cluster.stop("immediate")
        down = httpx.get(f"{base}/api/journals", headers={"authorization": f"Bearer {alice}"}, timeout=30)
        assert down.status_code == 503, down.text
        assert "PostgreSQL" in down.json()["error"] and str(root) in down.json()["error"]  # the server, named
        assert web.poll() is None
        cluster.start()
        wait_until("the gateway answering again", up, 60)
    finally:
        web.terminate()  # uvicorn stops gracefully, then ends with the signal (clean, for systemd)
        assert web.wait(timeout=30) in (0, -15), (root / "web.log").read_text()[-2000:]
    logged = (root / "web.log").read_text()
    assert '"event":"web_database_unavailable"' in logged and '"event":"web_stopped"' in logged, logged[-2000:]
    assert "Warning" not in logged, logged[-2000:]


def test_a_gateway_without_its_database_exits_naming_the_server(tmp_path):
    config = tmp_path / "foxhunt.toml"
    config.write_text(f'[web]\nlisten = "127.0.0.1:{free_port()}"\n')
    env = dict(os.environ, FOXHUNT_DSN=f"host=127.0.0.1 port={free_port()} dbname=nowhere user=nobody")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "foxhunt", "web", "serve", "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "cannot connect to PostgreSQL at host=127.0.0.1" in done.stderr, done.stderr
    assert time.monotonic() - started < 60
