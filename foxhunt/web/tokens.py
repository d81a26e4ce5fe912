"""The web gateway's API tokens in PostgreSQL (migrations/0006_web_tokens.sql): made, listed, revoked and
checked. Only a token's SHA-256 is stored; the token itself is printed once, by `foxhunt web token add`."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

import anyio

from foxhunt.errors import ConfigError
from foxhunt.web import auth
from foxhunt.web.auth import Principal, Scope
from foxhunt.web.db import Database

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}")  # as the table's CHECK: it becomes `web:NAME` in the journal


class TokenStore:
    """The tokens in the database, and the live ones as of at most `refresh_s` ago in memory: checking a
    request's token reads no table (a flood of junk tokens costs the database nothing) and writes none."""

    def __init__(self, db: Database, refresh_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.db = db
        self.refresh_s = refresh_s
        self._clock = clock
        self._by_digest: dict[bytes, Principal] = {}
        self._read_at = -math.inf
        self._reading = anyio.Lock()
        self._used: set[int] = set()

    async def add(self, name: str, scope: Scope) -> tuple[int, str]:
        """A new token for operator `name`: its id and the token, which is not kept anywhere."""
        if not NAME.fullmatch(name):
            raise ConfigError(f"token name {name!r}: use letters, digits and . _ - (at most 48), starting with a"
                              " letter or digit; it is the operator's name in the journal")
        if scope not in auth.SCOPES:
            raise ConfigError(f"token scope {scope!r}: one of {', '.join(auth.SCOPES)}")
        token = auth.new_token()
        rows = await self.db.fetch("INSERT INTO web_tokens (name, scope, digest) VALUES (%s, %s, %s) RETURNING id",
                                   (name, scope, auth.digest(token)), "storing a web token")
        return rows[0][0], token

    async def list(self) -> list[dict[str, object]]:
        rows = await self.db.fetch(
            "SELECT id, name, scope, created_at, last_used_at, revoked_at FROM web_tokens ORDER BY id", (),
            "listing the web tokens")
        return [{"id": i, "name": n, "scope": s, "created_at": _time(c), "last_used_at": _time(u),
                 "revoked_at": _time(r)} for i, n, s, c, u, r in rows]

    async def revoke(self, ref: str) -> list[int]:
        """Revoke token `ref` (its id), or every live token of operator `ref` (a name); the ids revoked.
        ConfigError when there is nothing live to revoke."""
        by_id = ref.isascii() and ref.isdigit()
        column = "id" if by_id else "name"
        rows = await self.db.fetch(
            f"UPDATE web_tokens SET revoked_at = now() WHERE {column} = %s AND revoked_at IS NULL RETURNING id",
            (int(ref) if by_id else ref,), "revoking a web token")
        self._read_at = -math.inf
        if not rows:
            raise ConfigError(f"no live web token {'with id' if by_id else 'named'} {ref!r}"
                              " (`foxhunt web token list` shows them)")
        return sorted(r[0] for r in rows)

    async def check(self, token: str) -> Principal | None:
        """The principal of a live token as of at most `refresh_s` ago; None for anything else (`lookup`
        asks the database about a token made since)."""
        if not _well_formed(token):
            return None
        who = (await self._live()).get(auth.digest(token))
        if who is not None:
            self._used.add(who.token_id)
        return who

    async def lookup(self, token: str) -> Principal | None:
        """The principal of a live token, asked of the database now: for a token `check` does not know,
        perhaps one made a moment ago. The caller bounds how often (the login limiter)."""
        if not _well_formed(token):
            return None
        rows = await self.db.fetch("SELECT id, name, scope FROM web_tokens WHERE digest = %s AND revoked_at IS NULL",
                                   (auth.digest(token),), "checking a web token")
        if not rows:
            return None
        who = Principal(*rows[0])
        self._by_digest = {**self._by_digest, auth.digest(token): who}
        self._used.add(who.token_id)
        return who

    async def live(self, token_id: int) -> bool:
        """Whether token `token_id` is live, as of at most `refresh_s` ago: what an open stream asks each
        second, so that a revoked token's streams end within about a second."""
        return any(p.token_id == token_id for p in (await self._live()).values())

    async def _live(self) -> dict[bytes, Principal]:
        """The live tokens by digest, read again from the database when older than `refresh_s` (one reader at
        a time; the others wait for its answer). The uses noted since the last read are written with it:
        one write a second, not one a request."""
        if self._clock() - self._read_at < self.refresh_s:
            return self._by_digest
        async with self._reading:
            if self._clock() - self._read_at < self.refresh_s:
                return self._by_digest
            used, self._used = sorted(self._used), set()
            if used:
                await self.db.fetch("UPDATE web_tokens SET last_used_at = now() WHERE id = ANY(%s)", (used,),
                                    "noting the web tokens' use")
            rows = await self.db.fetch("SELECT digest, id, name, scope FROM web_tokens WHERE revoked_at IS NULL",
                                       (), "checking the web tokens")
            self._by_digest = {bytes(d): Principal(i, n, s) for d, i, n, s in rows}
            self._read_at = self._clock()
            return self._by_digest


def _well_formed(token: str) -> bool:
    return token.startswith(auth.TOKEN_PREFIX) and len(token) <= 100


def _time(value) -> str | None:
    return None if value is None else value.astimezone().isoformat(timespec="seconds")
