"""The web gateway's API tokens in PostgreSQL (migrations/0006_web_tokens.sql): made, listed, revoked and
checked. Only a token's SHA-256 is stored; the token itself is printed once, by `foxhunt web token add`."""

from __future__ import annotations

import re

from foxhunt.errors import ConfigError
from foxhunt.web import auth
from foxhunt.web.auth import Principal, Scope
from foxhunt.web.db import Database

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}")  # as the table's CHECK: it becomes `web:NAME` in the journal


class TokenStore:
    def __init__(self, db: Database) -> None:
        self.db = db

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
        column = "id" if ref.isdigit() else "name"
        rows = await self.db.fetch(
            f"UPDATE web_tokens SET revoked_at = now() WHERE {column} = %s AND revoked_at IS NULL RETURNING id",
            (int(ref) if ref.isdigit() else ref,), "revoking a web token")
        if not rows:
            raise ConfigError(f"no live web token {'with id' if ref.isdigit() else 'named'} {ref!r}"
                              " (`foxhunt web token list` shows them)")
        return sorted(r[0] for r in rows)

    async def check(self, token: str) -> Principal | None:
        """The principal of a live token, noting its use; None for anything else."""
        if not token.startswith(auth.TOKEN_PREFIX) or len(token) > 100:
            return None
        rows = await self.db.fetch(
            "UPDATE web_tokens SET last_used_at = now() WHERE digest = %s AND revoked_at IS NULL"
            " RETURNING id, name, scope", (auth.digest(token),), "checking a web token")
        return Principal(*rows[0]) if rows else None

    async def live(self, token_id: int) -> bool:
        rows = await self.db.fetch("SELECT 1 FROM web_tokens WHERE id = %s AND revoked_at IS NULL", (token_id,),
                                   "checking a web session's token")
        return bool(rows)


def _time(value) -> str | None:
    return None if value is None else value.astimezone().isoformat(timespec="seconds")
