"""Shared fixtures. The PostgreSQL tests run against a real, throwaway cluster that this session starts
in a temporary state directory; if it cannot start, the tests that need it fail (they never skip)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

from foxhunt.adapters.journal.pg import migrate
from foxhunt.adapters.journal.pg_embedded import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    import torch

    # Without a GPU, Triton's interpreter runs foxhunt's fused kernels on the CPU (tests/ml/test_fused.py).
    # Triton reads the switch when a kernel is defined, and its own library's when it is imported (which
    # torch's determinism settings do): so before any test runs, for the whole session.
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def state_dir():
    # Short and world-traversable: the socket path must fit in 107 bytes, and when the tests run as root
    # the cluster belongs to the `foxhunt` system user, who must be able to enter this directory.
    path = Path(tempfile.mkdtemp(prefix="fh-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(state_dir):
    cluster = EmbeddedCluster(state_dir)
    cluster.start()  # raises EmbeddedDatabaseError: the session's PostgreSQL tests then fail, loudly
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pg_dsn(cluster):
    anyio.run(migrate, cluster.dsn)
    return cluster.dsn


@pytest.fixture
def journal_name():
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def cli_env(state_dir, pg_dsn):
    """Environment for `foxhunt` subprocesses: the session's cluster, logs as JSON."""
    env = dict(os.environ)
    env["FOXHUNT_STATE_DIR"] = str(state_dir)
    env.pop("FOXHUNT_DSN", None)
    return env


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server behind a proxy that can break uploads (tests/s3_server.py)."""
    from tests.s3_server import s3_server as serve

    with serve() as proxy:
        yield proxy
