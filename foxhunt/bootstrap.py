"""The composition root: the only place that reads the environment and builds adapters."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import msgspec

import foxhunt
from foxhunt.adapters.journal_pg_writer import WriterPolicy
from foxhunt.adapters.journal_postgres import PostgresJournalStore
from foxhunt.adapters.pg import migrate
from foxhunt.adapters.pg_embedded import EmbeddedCluster
from foxhunt.adapters.systemd import Notifier
from foxhunt.admin.server import Access, ServerPolicy
from foxhunt.config import Config
from foxhunt.errors import ConfigError
from foxhunt.observability import telemetry
from foxhunt.runtime.live import Operations

# sun_path of struct sockaddr_un holds 108 bytes with the terminating NUL (unix(7))
MAX_SOCKET_PATH = 107


def state_dir(cfg: Config) -> Path:
    """`[state] dir` / FOXHUNT_STATE_DIR, else systemd's STATE_DIRECTORY, else a per-user default."""
    if cfg.state.dir:
        return Path(cfg.state.dir)
    if systemd := os.environ.get("STATE_DIRECTORY"):
        return Path(systemd.split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/foxhunt")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "foxhunt"


def configure_numba(cfg: Config) -> Path:
    """Where numba caches compiled kernels, set before any is compiled: `[state] numba_cache_dir`, else
    systemd's CACHE_DIRECTORY (the unit's CacheDirectory=), else the state directory. The default beside
    the source files is unwritable in a hardened install (ProtectSystem=strict)."""
    import numba

    if cfg.state.numba_cache_dir:
        path = Path(cfg.state.numba_cache_dir)
    elif systemd := os.environ.get("CACHE_DIRECTORY"):
        path = Path(systemd.split(":")[0]) / "numba"
    else:
        path = state_dir(cfg) / "numba-cache"
    numba.config.CACHE_DIR = str(path)
    return path


def admin_socket(cfg: Config) -> Path:
    """`[admin] socket`, else admin.sock in systemd's RUNTIME_DIRECTORY, else in the state directory."""
    if cfg.admin.socket:
        path = Path(cfg.admin.socket)
    elif runtime := os.environ.get("RUNTIME_DIRECTORY"):
        path = Path(runtime.split(":")[0]) / "admin.sock"
    else:
        path = state_dir(cfg) / "admin.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ConfigError(f"admin.socket: {path} is longer than the {MAX_SOCKET_PATH} bytes a Unix socket path may have")
    return path


def operations(cfg: Config, journal: str) -> Operations:
    """systemd's notify socket (from the environment), the admin socket and telemetry (configuration)."""
    admin = None
    if cfg.admin.enabled:
        a = cfg.admin
        admin = ServerPolicy(
            path=admin_socket(cfg), group=a.group, access=Access.resolve(a.allowed_users, a.allowed_groups),
            max_connections=a.max_connections, idle_timeout=a.idle_timeout,
        )
    exporter = cfg.telemetry.exporter or ("otlp" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "none")
    tel = telemetry.build(exporter, cfg.telemetry.metrics_interval, "foxhunt", journal, cfg.telemetry.traces_per_second)
    return Operations(notifier=Notifier(), admin=admin, telemetry=tel)


def embedded_cluster(cfg: Config) -> EmbeddedCluster:
    return EmbeddedCluster(state_dir(cfg))


def resolve_dsn(cfg: Config) -> str:
    """The configured DSN, or the embedded cluster's, started on demand."""
    return cfg.journal.dsn or embedded_cluster(cfg).start()


async def open_store(cfg: Config, dsn: str) -> PostgresJournalStore:
    await migrate(dsn)
    j = cfg.journal
    policy = WriterPolicy(
        batch_max=j.batch_max, queue_max=j.queue_max, stall_after=j.stall_after, write_timeout=j.write_timeout,
        backoff_max=j.reconnect_backoff_max,
    )
    return PostgresJournalStore(dsn, policy)


def fingerprint() -> dict[str, str]:
    """Where a run happened; journaled with every RunStarted. Stable across runs on one machine."""
    return {
        "foxhunt": foxhunt.__version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "system": platform.system(),
        "msgspec": msgspec.__version__,
    }
