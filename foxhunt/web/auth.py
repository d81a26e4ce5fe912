"""Who may use the gateway, and how a browser proves it on each request. Pure: no I/O, an injected clock.

- A token is 32 random bytes (`secrets`), shown once; the database keeps its SHA-256 (tokens.py). A
  token of that much entropy needs no slow hash: nobody guesses 256 bits, and a slow hash would only slow
  every API call. Its scope is `read` or `operate` (read, and send commands).
- A script sends its token with every request (`Authorization: Bearer ...`). A browser logs in once with
  a token and gets a session: a random id in a cookie the page's scripts cannot read (HttpOnly), sent only
  to this site (SameSite=Strict), and a CSRF token the page must echo in `X-CSRF-Token` on every request
  that changes something (the synchronizer-token pattern of OWASP's CSRF cheat sheet), so a form or
  script on another site cannot act with the cookie. A browser's WebSocket must come from this origin.
- Failed logins are counted per client address: after `attempts` within `window` seconds, unknown tokens
  from it are refused until the oldest failure ages out. A live token is never refused for its address's
  failures: someone else's junk from a shared address (a proxy, a NAT) must not lock an operator out, and
  nobody guesses a token of 256 bits however many tries the limit allows.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

Scope = Literal["read", "operate"]
SCOPES: tuple[Scope, ...] = ("read", "operate")
TOKEN_PREFIX = "fht_"  # recognisable in a leaked file or log, as GitHub's ghp_ tokens are


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Principal:
    """Whoever a request comes from: the token's id, the operator's name and the token's scope."""

    token_id: int
    name: str
    scope: Scope

    def may(self, scope: Scope) -> bool:
        return scope == "read" or self.scope == "operate"

    @property
    def operator(self) -> str:
        """The name the daemon journals with this user's commands (admin/protocol.py, Request.operator)."""
        return f"web:{self.name}"


@dataclass
class Session:
    id: str
    principal: Principal
    csrf: str
    expires: float  # on the sessions' clock

    def csrf_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


class SessionsFull(Exception):
    """No room for another session without ending one of a higher scope."""


class Sessions:
    """Browser sessions, in the gateway's memory: a restart logs everyone out, which is the safe side.

    Bounded two ways. A token holds at most `per_token` sessions: its next login ends its own oldest, so a
    token that logs in in a loop pushes out only itself. The table holds at most `limit`: when it is full
    of live sessions, a login ends the oldest session of the lowest scope up to its own (a read login never
    ends an operator's session), and is refused (SessionsFull) when there is none."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic, limit: int = 10_000,
                 per_token: int = 16) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.limit = limit
        self.per_token = per_token
        self.by_id: dict[str, Session] = {}  # in the order they were opened

    def open(self, principal: Principal) -> Session:
        now = self.clock()
        own = [sid for sid, s in self.by_id.items() if s.principal.token_id == principal.token_id]
        for sid in own[:max(0, len(own) - self.per_token + 1)]:
            del self.by_id[sid]
        if len(self.by_id) >= self.limit:
            self.by_id = {sid: s for sid, s in self.by_id.items() if s.expires > now}
        if len(self.by_id) >= self.limit:
            lower = SCOPES[:SCOPES.index(principal.scope) + 1]  # the lowest scope's oldest goes first
            victim = next((sid for scope in lower for sid, s in self.by_id.items() if s.principal.scope == scope), None)
            if victim is None:
                raise SessionsFull(f"{self.limit} sessions are open, none of them of the {principal.scope} scope")
            del self.by_id[victim]
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), now + self.ttl_s)
        self.by_id[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        session = self.by_id.get(session_id) if session_id else None
        if session is not None and session.expires <= self.clock():
            del self.by_id[session.id]
            return None
        return session

    def close(self, session_id: str) -> None:
        self.by_id.pop(session_id, None)

    def close_token(self, token_id: int) -> None:
        """A revoked token's sessions end with it."""
        self.by_id = {sid: s for sid, s in self.by_id.items() if s.principal.token_id != token_id}


@dataclass
class LoginLimiter:
    attempts: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    failures: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, client: str) -> float:
        """0 when `client` may try to log in now, else the seconds until it may."""
        recent = self._recent(client)
        if len(recent) < self.attempts:
            return 0.0
        return max(0.001, recent[0] + self.window_s - self.clock())

    def failed(self, client: str) -> None:
        self._recent(client).append(self.clock())

    def succeeded(self, client: str) -> None:
        self.failures.pop(client, None)

    def _recent(self, client: str) -> deque[float]:
        recent = self.failures.setdefault(client, deque())
        while recent and recent[0] + self.window_s <= self.clock():
            recent.popleft()
        if len(self.failures) > 100_000:  # a flood of addresses: forget the quiet ones
            self.failures = {c: d for c, d in self.failures.items() if d and d[-1] + self.window_s > self.clock()}
            self.failures[client] = recent
        return recent


def same_origin(origin: str | None, host: str | None) -> bool:
    """Whether a browser's Origin header names the host the request was sent to (Host header)."""
    if not origin or not host or origin == "null":
        return False
    return urlsplit(origin).netloc.lower() == host.lower()
