"""Connecting to PostgreSQL, translating its errors, and applying the numbered migrations."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from foxhunt.errors import JournalError, JournalUnavailable

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"
_MIGRATE_LOCK = 0x666F7868  # "foxh": serialises concurrent migrators


def describe(dsn: str) -> str:
    """Where a DSN points, for messages: host, port, database and user; never the password."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        raise JournalError(f"invalid PostgreSQL DSN: {e}") from e
    parts = [f"{key}={info[key]}" for key in ("host", "port", "dbname", "user") if info.get(key)]
    return " ".join(parts) or "libpq defaults"


def _scrub(text: str, dsn: str) -> str:
    password = conninfo_to_dict(dsn).get("password")
    text = text.strip().splitlines()[0] if text.strip() else text
    return text.replace(str(password), "***") if password else re.sub(r"password=\S+", "password=***", text)


async def connect(dsn: str, *, autocommit: bool = False, application_name: str = "foxhunt") -> psycopg.AsyncConnection:
    try:
        return await psycopg.AsyncConnection.connect(
            dsn, autocommit=autocommit, application_name=application_name, connect_timeout=10
        )
    except psycopg.Error as e:
        raise JournalUnavailable(f"cannot connect to PostgreSQL at {describe(dsn)}: {_scrub(str(e), dsn)}") from e


def unavailable(e: psycopg.Error, dsn: str, doing: str) -> JournalUnavailable:
    return JournalUnavailable(f"PostgreSQL at {describe(dsn)} failed while {doing}: {_scrub(str(e), dsn)}")


def migration_files(directory: Path = MIGRATIONS_DIR) -> list[tuple[int, Path]]:
    files = []
    for path in sorted(directory.glob("*.sql")):
        number, _, _ = path.name.partition("_")
        if not number.isdigit():
            raise JournalError(f"migration {path} must be named NNNN_description.sql")
        files.append((int(number), path))
    return files


async def migrate(dsn: str) -> list[str]:
    """Apply the migrations the database lacks, each in its own transaction; return their names."""
    applied = []
    conn = await connect(dsn, application_name="foxhunt migrate")
    try:
        async with conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            await conn.commit()
            for version, path in migration_files():
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
                    cur = await conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (version,))
                    if await cur.fetchone():
                        continue
                    await conn.execute(path.read_text())
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, path.name)
                    )
                    applied.append(path.name)
    except psycopg.Error as e:
        raise unavailable(e, dsn, "migrating the schema") from e
    return applied
