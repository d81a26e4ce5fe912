"""The gateway's connection to PostgreSQL for its own small queries (tokens, pages of events, prices,
who holds a journal): one connection, one query at a time, opened again when the database went away.
Following journals uses the journal store's own connections (adapters/journal/postgres.py, tail)."""

from __future__ import annotations

import anyio
import psycopg

from foxhunt.adapters.journal.pg import connect, unavailable


class Database:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.AsyncConnection | None = None
        self._lock = anyio.Lock()

    async def fetch(self, query: str, params: tuple = (), doing: str = "answering the web gateway") -> list[tuple]:
        """The rows of one statement, in autocommit; JournalUnavailable (naming the server) when it fails
        twice, the second time on a new connection."""
        async with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = await connect(self.dsn, autocommit=True, application_name="foxhunt web")
                    cur = await self._conn.execute(query, params)
                    return await cur.fetchall() if cur.description is not None else []
                except psycopg.OperationalError as e:
                    await self._drop()
                    if attempt == 2:
                        raise unavailable(e, self.dsn, doing) from e
                except psycopg.Error as e:
                    raise unavailable(e, self.dsn, doing) from e
        raise AssertionError("unreachable")

    async def _drop(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()
