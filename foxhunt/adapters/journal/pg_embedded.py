"""The embedded default database: a private PostgreSQL cluster in foxhunt's state directory.

It uses the system's PostgreSQL binaries (scripts/ install them), listens on a Unix socket only (no TCP),
and is started on demand. The socket directory is mode 0700, which is what makes `trust` authentication
on it safe: only the cluster's owner (and root) can reach it.

`initdb` refuses to run as root, so when foxhunt runs as root the cluster belongs to a dedicated system
user, `foxhunt`, created on first use, and the PostgreSQL programs run as that user through `runuser`.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import psycopg

from foxhunt.errors import EmbeddedDatabaseError

SYSTEM_USER = "foxhunt"
DATABASE = "foxhunt"
PORT = 5432  # only names the socket file; nothing listens on TCP
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes on Linux, with its terminating NUL


def find_bin_dir() -> Path:
    """FOXHUNT_PG_BIN, else the newest /usr/lib/postgresql/N/bin, else wherever PATH has initdb."""
    if env := os.environ.get("FOXHUNT_PG_BIN"):
        return Path(env)
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    if found := shutil.which("initdb"):
        return Path(found).parent
    raise EmbeddedDatabaseError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install them (scripts/setup does, with"
        " apt-get install postgresql), set FOXHUNT_PG_BIN, or point foxhunt at a server with FOXHUNT_DSN"
    )


class EmbeddedCluster:
    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir).resolve() / "pg"
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log_file = self.root / "postgres.log"
        self.as_root = os.geteuid() == 0
        self.user = SYSTEM_USER if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        socket_file = self.socket_dir / f".s.PGSQL.{PORT}"
        if len(str(socket_file)) > _SOCKET_PATH_MAX:
            raise EmbeddedDatabaseError(
                f"state directory {state_dir} is too deep: the socket path {socket_file} would exceed"
                f" {_SOCKET_PATH_MAX} bytes; choose a shorter FOXHUNT_STATE_DIR"
            )

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port={PORT} dbname={DATABASE} user={self.user}"

    def status(self) -> str:
        """'running', 'stopped', or 'absent' (never initialised)."""
        if not (self.data_dir / "PG_VERSION").exists():
            return "absent"
        done = self._pg("pg_ctl", "status", "-D", str(self.data_dir), check=False)
        return "running" if done.returncode == 0 else "stopped"

    def start(self) -> str:
        """Initialise if needed, start if stopped, create the database; return the DSN."""
        with self._lock():
            if self.status() == "absent":
                self._init()
            if self.status() != "running":
                self._pg(
                    "pg_ctl", "start", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "-t", "60",
                    what="start the embedded PostgreSQL",
                )
            self._create_database()
        return self.dsn

    def stop(self, mode: str = "fast") -> bool:
        """Stop the cluster; False if it was not running. `fast` ends sessions and checkpoints; `immediate`
        is PostgreSQL's crash-like stop (recovery from the WAL on the next start); committed data stays."""
        with self._lock():
            if self.status() != "running":
                return False
            self._pg("pg_ctl", "stop", "-D", str(self.data_dir), "-m", mode, "-w", what="stop the embedded PostgreSQL")
            return True

    # --- internals -------------------------------------------------------------------------------

    def _init(self) -> None:
        if self.as_root:
            self._ensure_system_user()
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        if self.as_root:
            self._check_reachable()
            for path in (self.root, self.socket_dir):
                shutil.chown(path, SYSTEM_USER, SYSTEM_USER)
        self._pg(
            "initdb", "-D", str(self.data_dir), "-U", self.user, "--auth=trust", "-E", "UTF8", "--locale=C",
            what="initialise the embedded PostgreSQL cluster",
        )
        socket_dir = str(self.socket_dir).replace("'", "''")  # a quote in a conf string is doubled
        settings = (
            "\n# foxhunt: private cluster, Unix socket only\n"
            "listen_addresses = ''\n"
            f"unix_socket_directories = '{socket_dir}'\n"
            "unix_socket_permissions = 0700\n"
            f"port = {PORT}\n"
        )
        with (self.data_dir / "postgresql.conf").open("a") as conf:  # root may write it; the owner stays
            conf.write(settings)

    def _create_database(self) -> None:
        try:
            with psycopg.connect(
                f"host={self.socket_dir} port={PORT} dbname=postgres user={self.user}", autocommit=True
            ) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                    conn.execute(f'CREATE DATABASE "{DATABASE}"')
        except psycopg.Error as e:
            raise EmbeddedDatabaseError(f"embedded PostgreSQL at {self.socket_dir} does not answer: {e}") from e

    def _ensure_system_user(self) -> None:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            done = subprocess.run(
                ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                 "--shell", "/usr/sbin/nologin", SYSTEM_USER],
                capture_output=True, text=True,
            )
            if done.returncode not in (0, 9):  # 9: created meanwhile by another process
                raise EmbeddedDatabaseError(f"cannot create system user {SYSTEM_USER!r}: {done.stderr.strip()}")

    def _check_reachable(self) -> None:
        """The system user must be able to walk down to the state directory."""
        uid = pwd.getpwnam(SYSTEM_USER).pw_uid
        for parent in reversed(self.root.parents):
            st = parent.stat()
            if st.st_uid != uid and not st.st_mode & 0o001:
                raise EmbeddedDatabaseError(
                    f"the embedded PostgreSQL runs as user {SYSTEM_USER!r}, which cannot enter {parent}"
                    f" (mode {st.st_mode & 0o777:o}); put the state directory elsewhere with FOXHUNT_STATE_DIR"
                )

    @contextmanager
    def _lock(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root.parent / ".pg.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _pg(self, program: str, *args: str, check: bool = True, what: str = ""):
        argv = [str(find_bin_dir() / program), *args]
        if self.as_root:
            argv = ["runuser", "-u", SYSTEM_USER, "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EmbeddedDatabaseError(f"could not {what or program}: {e}") from e
        if check and done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            hint = f"; see {self.log_file}" if program == "pg_ctl" else ""
            raise EmbeddedDatabaseError(f"could not {what or program}: {' | '.join(tail)}{hint}")
        return done
