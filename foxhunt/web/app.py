"""The gateway's routes: one table (`ENDPOINTS`) that both serves the API and writes its OpenAPI document.

Every route but the login and the dashboard's files needs a principal (auth.py): a bearer token, or a
browser session whose requests that change something carry its CSRF token and come from this origin. A
route names the scope it needs; query parameters are declared, parsed and refused by name. Errors answer
as `{"error": "..."}` with the status that says what went wrong: 400 bad input, 401 no or bad
credentials, 403 not allowed, 404 no such journal, 409 the daemon refused, 413 a body too large, 415 a body
not JSON, 429 too many logins (or a report of yours still being made), 503 PostgreSQL or the daemon cannot
be reached.

Reads come from PostgreSQL (journals.py); commands go to the daemon's admin socket with the user's name.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from foxhunt.admin import protocol
from foxhunt.admin.client import AdminUnavailable, Connection
from foxhunt.config import WebConfig
from foxhunt.errors import ConfigError, JournalError, JournalNotFound, JournalUnavailable
from foxhunt.messages.base import FIXED_POINT_FIELDS
from foxhunt.ports import JournalStore
from foxhunt.runtime import views
from foxhunt.runtime.summary import summarize
from foxhunt.web import auth
from foxhunt.web.auth import LoginLimiter, Principal, Scope, Session, Sessions, SessionsFull
from foxhunt.web.db import Database
from foxhunt.web.journals import Journals, JournalView, encoded
from foxhunt.web.reports import ReportBusy, Reports
from foxhunt.web.tokens import TokenStore

log = structlog.get_logger("foxhunt.web")

STATIC = Path(__file__).resolve().parent / "static"
COOKIE = "foxhunt_session"
# behind TLS (web.secure_cookies) the cookie's name carries the __Host- prefix, which browsers accept only
# from a secure origin, with Path=/ and no Domain: no sibling or subdomain site can set or shadow it
# (RFC 6265bis, "Cookie Name Prefixes")
SECURE_COOKIE = "__Host-" + COOKIE
CSRF_HEADER = "x-csrf-token"
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    # scripts only from this site, none inline; inline styles are allowed because the chart library sets them
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
                               " connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
}


# --- what goes over the wire (the OpenAPI document's schemas come from these) ---------------------

class ErrorOut(msgspec.Struct):
    error: str


class LoginIn(msgspec.Struct, forbid_unknown_fields=True):
    token: str


class SessionOut(msgspec.Struct):
    name: str
    scope: str
    csrf: str
    live_journal: str
    # the event fields that are fixed-point numbers (nanos: 10^-9 units; messages/base.py), for showing them
    fixed_point: list[str] = msgspec.field(default_factory=lambda: sorted(FIXED_POINT_FIELDS))


class JournalEntry(msgspec.Struct):
    name: str
    created_at: str
    last_seq: int
    config_digest: str
    writer: str | None  # the application holding the journal's writer lock: a daemon running on it


class EventOut(msgspec.Struct):
    seq: int
    causation: int | None
    kind: str
    event: dict[str, Any]


class EventsPage(msgspec.Struct):
    events: list[EventOut]
    next_seq: int  # ask for this next: no gap, no repeat
    last_seq: int


class ViewState(msgspec.Struct):
    journal: str
    seq: int
    inputs: int
    snapshot_seq: int  # the kernel snapshot the view started from (0: none, it took in every input)
    ready: bool  # caught up with the journal as it was when the gateway started following it
    caught_up_to: int
    last_event_ns: int
    trading_state: str | None
    open_orders: int
    venues_down: list[str]
    paused_strategies: list[str]


class Status(msgspec.Struct):
    journal: str
    writer: str | None
    view: ViewState


class PositionOut(msgspec.Struct):
    symbol: str
    quantity: str
    avg_price: str
    mark: str
    unrealized_pnl: str
    realized_pnl: str
    commissions: str
    currency: str
    fills: int


class OrderOut(msgspec.Struct):
    order_id: str
    strategy: str
    symbol: str
    side: str
    type: str
    quantity: str
    filled: str
    price: str | None
    status: str
    uncertain: bool


class PnlOut(msgspec.Struct):
    by_currency: dict[str, dict[str, str]]
    equity: str
    peak_equity: str
    max_drawdown: str


class FillOut(msgspec.Struct):
    seq: int
    time_ns: int
    order_id: str
    symbol: str
    side: str | None
    quantity: str
    price: str


class RunSummaryOut(msgspec.Struct):
    inputs: int
    fills: int
    pnl: str  # the change of equity over the run
    so_far: bool  # the run is the journal's last: up to now


class RunOut(msgspec.Struct):
    run_id: int
    started_seq: int
    started_ns: int
    recorded_by: str  # run (traded) or ingest (market data loaded)
    clock: str
    config_digest: str
    fingerprint: dict[str, str]  # where it ran: foxhunt's version, the kernel's behaviour, Python, ...
    stopped_seq: int | None  # None: running, or it ended without a RunStopped (the process died)
    stopped_ns: int | None
    stop_reason: str | None
    summary: RunSummaryOut | None  # None: the view has not taken in the whole run (it lies before the snapshot
    # the view started from, or the view has not caught up with it yet)


class BarsOut(msgspec.Struct):
    symbol: str
    bars: list[tuple[int, float, float, float, float]]  # [time_s, open, high, low, close] of the mid price


class CommandIn(msgspec.Struct, forbid_unknown_fields=True):
    command: str  # halt, reduce, resume, kill, flatten, cancel, limit, strategy (foxhunt admin's `help`)
    reason: str
    args: list[str] = []


class CommandOut(msgspec.Struct):
    seq: int
    trading_state: str
    derived: list[dict[str, Any]]


# --- the routes --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # int, str or bool
    help: str
    default: Any = None  # None: required


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Callable[..., Awaitable[Any]]
    scope: Scope | None  # None: no principal needed
    summary: str
    query: tuple[Param, ...] = ()
    body: type | None = None
    response: Any = None  # a type msgspec describes; str: a media type that is not JSON


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


@dataclass
class Gateway:
    """What the routes share; built by the composition root (bootstrap.web_gateway)."""

    store: JournalStore
    db: Database
    web: WebConfig
    admin_socket: Path  # the daemon's (web.admin_socket, or where `foxhunt run` with this configuration puts it)
    tokens: TokenStore = field(init=False)
    sessions: Sessions = field(init=False)
    limiter: LoginLimiter = field(init=False)
    reports: Reports
    journals: Journals | None = None  # once the app has started (it holds the views' task group)

    def __post_init__(self) -> None:
        self.tokens = TokenStore(self.db)
        self.sessions = Sessions(self.web.session_hours * 3600)
        self.limiter = LoginLimiter(self.web.login_attempts, self.web.login_window)

    # --- who is asking -------------------------------------------------------------------------

    async def principal(self, conn: HTTPConnection, unsafe: bool) -> Principal:
        """The request's principal, or HttpError 401/403. `unsafe`: the request changes something (a
        session must then show its CSRF token); a browser's WebSocket counts as unsafe for its origin."""
        header = conn.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise HttpError(401, "Authorization must be 'Bearer <token>'")
            return await self.check_token(token.strip(), _client(conn))
        session = self.sessions.get(conn.cookies.get(self.cookie))
        if session is None:
            raise HttpError(401, "log in first (POST /api/login), or send 'Authorization: Bearer <token>'")
        if not await self.tokens.live(session.principal.token_id):
            self.sessions.close_token(session.principal.token_id)
            raise HttpError(401, "the token this session was opened with has been revoked")
        origin = conn.headers.get("origin")
        if (unsafe or origin is not None) and not auth.same_origin(origin, conn.headers.get("host")):
            raise HttpError(403, "a session's request that changes something must come from this site (Origin)")
        if unsafe and conn.scope["type"] == "http" and not session.csrf_ok(conn.headers.get(CSRF_HEADER)):
            raise HttpError(403, "missing or wrong X-CSRF-Token: this session's requests that change something"
                                 " carry the token GET /api/session gives")
        return session.principal

    async def check_token(self, token: str, client: str) -> Principal:
        """A token's principal. A wrong one counts against the client's failed logins, however sent, and a
        client over the limit is answered 429 instead of 401; a live token is taken whatever its address's
        failures (auth.py). A token the gateway's copy of the live ones does not know is asked of the
        database, unless its client is over the limit: junk costs the database at most the limit's queries."""
        who = await self.tokens.check(token)
        if who is not None:
            return who
        wait = self.limiter.retry_after(client)
        if wait > 0:
            log.warning("web_login_limited", client=client)
            raise HttpError(429, f"too many failed logins from {client}; try again in {wait:.0f} s",
                            {"retry-after": str(max(1, round(wait)))})
        who = await self.tokens.lookup(token)
        if who is not None:
            return who
        self.limiter.failed(client)
        log.warning("web_login_failed", client=client)
        raise HttpError(401, "unknown or revoked token")

    @property
    def cookie(self) -> str:
        return SECURE_COOKIE if self.web.secure_cookies else COOKIE

    async def no_longer_allowed(self, who: Principal, session_id: str | None) -> str | None:
        """Why an open stream's credentials no longer hold, or None while they do: its token revoked, or (a
        browser's stream) its session ended."""
        try:
            if not await self.tokens.live(who.token_id):
                self.sessions.close_token(who.token_id)
                return "the token has been revoked"
        except JournalUnavailable:
            return None  # the database is away: the stream's own reads say so; the token is checked again
        if session_id is not None and self.sessions.get(session_id) is None:
            return "the session has ended (logged out or expired)"
        return None

    async def view(self, name: str) -> JournalView:
        assert self.journals is not None
        return await self.journals.view(name)


def _client(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


# --- handlers ----------------------------------------------------------------------------------

async def login(gw: Gateway, request: Request, _: None, q: dict[str, Any], body: LoginIn) -> Response:
    client = _client(request)
    origin = request.headers.get("origin")
    if origin is not None and not auth.same_origin(origin, request.headers.get("host")):
        raise HttpError(403, "a login must come from this site (Origin)")
    who = await gw.check_token(body.token.strip(), client)
    gw.limiter.succeeded(client)
    try:
        session = gw.sessions.open(who)
    except SessionsFull as e:
        raise HttpError(503, f"cannot open a session: {e}") from None
    log.info("web_login", name=who.name, scope=who.scope, client=client)
    response = _json(_session_out(gw, session))
    response.set_cookie(gw.cookie, session.id, max_age=int(gw.web.session_hours * 3600), httponly=True, samesite="strict",
                        secure=gw.web.secure_cookies, path="/")
    return response


async def logout(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Response:
    gw.sessions.close(request.cookies.get(gw.cookie, ""))
    response = _json({})
    response.delete_cookie(gw.cookie, path="/", secure=gw.web.secure_cookies)
    return response


async def session_info(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> SessionOut:
    session = gw.sessions.get(request.cookies.get(gw.cookie))
    if session is None:
        raise HttpError(400, "this is a token's request, not a browser session's: it has no CSRF token")
    return _session_out(gw, session)


def _session_out(gw: Gateway, session: Session) -> SessionOut:
    return SessionOut(session.principal.name, session.principal.scope, session.csrf, gw.web.journal)


async def list_journals(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    assert gw.journals is not None
    return await gw.journals.listing()


async def events(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    assert gw.journals is not None
    return await gw.journals.events(request.path_params["name"], q["from_seq"], q["limit"], _kinds(q["kinds"]),
                                    last=q["last"])


async def state(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    return (await gw.view(request.path_params["name"])).state()


async def positions(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    return views.positions(view.kernel) if view.kernel else []


async def orders(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    if not 0 < q["n"] <= 1000:
        raise HttpError(400, f"query parameter n: a whole number from 1 to 1000, got {q['n']}")
    return views.orders(view.kernel, q["open"], q["n"]) if view.kernel else []


async def fills(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    return list((await gw.view(request.path_params["name"])).fills)


async def runs(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    name = request.path_params["name"]
    view = await gw.view(name)
    assert gw.journals is not None
    return await gw.journals.runs(name, view)


async def pnl(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    if view.kernel is None:
        return PnlOut({}, "0", "0", "0")
    return views.pnl(view.kernel)


async def risk(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    return views.risk(view.kernel) if view.kernel else {}


async def summary(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    if view.kernel is None:
        return {"journal": view.name, "events": 0}
    result = summarize(view.kernel, events=view.seq, seconds=0.0, journal=view.name, inputs=view.inputs)
    result.pop("seconds"), result.pop("events_per_second")  # of the gateway's replay, not of the run
    return result


async def models(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    return (await gw.view(request.path_params["name"])).models_shown()


async def bars(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    view = await gw.view(request.path_params["name"])
    return [BarsOut(symbol, [tuple(b) for b in view.bars[symbol]]) for symbol in sorted(view.bars)]


async def report(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Response:
    """The run's HTML report (runtime/report.py), made off the event loop and kept a while (reports.py).

    A report shows a journal's text, which anyone who can write a journal chose: it is served under the
    policy it carries (only its own scripts, by their hashes) and sandboxed, an origin of its own with no
    access to this site's cookies, so even a script that ran could not act as the viewer."""
    from foxhunt.runtime.report import policy_of

    name = request.path_params["name"]
    last_seq = (await gw.store.info(name)).last_seq
    try:
        page = await gw.reports.page(name, last_seq, who.token_id)
    except ReportBusy as e:
        raise HttpError(429, str(e), {"retry-after": "5"}) from None
    return HTMLResponse(page.html, headers={
        "content-security-policy": f"{policy_of(page.html)}; sandbox allow-scripts; frame-ancestors 'none'",
        "x-report-seq": str(page.seq)})


async def status(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    return await _status(gw, q["journal"] or gw.web.journal)


async def _status(gw: Gateway, name: str) -> Status:
    if not name:
        raise HttpError(404, "no live journal is configured (web.journal) and none was asked for (?journal=NAME)")
    assert gw.journals is not None
    view = await gw.view(name)
    return Status(name, await gw.journals.writer(name), msgspec.convert(view.state(), ViewState))


async def command(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: CommandIn) -> Any:
    spec = protocol.COMMANDS.get(body.command)
    if spec is None or not spec.changes_state:
        allowed = ", ".join(n for n, s in protocol.COMMANDS.items() if s.changes_state)
        raise HttpError(400, f"command {body.command!r}: the gateway sends only commands that change the daemon's"
                             f" state ({allowed}); what they would show is read from the journal")
    argv = [body.command, *body.args, "--reason", body.reason]
    try:
        protocol.parse(argv)
    except protocol.UsageError as e:
        raise HttpError(400, str(e)) from None
    log.info("web_command", operator=who.operator, argv=argv)

    def ask() -> protocol.Reply:
        conn = Connection(gw.admin_socket, timeout=30)
        try:
            return conn.ask(argv, operator=who.operator)
        finally:
            conn.close()

    try:
        reply = await anyio.to_thread.run_sync(ask)
    except AdminUnavailable as e:
        raise HttpError(503, f"the daemon's admin socket: {e}") from None
    if not reply.ok:
        raise HttpError(409, f"the daemon refused: {reply.error}")
    return reply.result


async def openapi(gw: Gateway, request: Request, who: Principal, q: dict[str, Any], body: None) -> Any:
    return OPENAPI


def _kinds(text: str) -> list[str]:
    return [k for k in (part.strip() for part in text.split(",")) if k]


NAME = Param("name", str, "the journal's name")
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/api/login", login, None, "open a browser session with a token (rate-limited per client)",
             body=LoginIn, response=SessionOut),
    Endpoint("POST", "/api/logout", logout, "read", "end this browser session", response=dict),
    Endpoint("GET", "/api/session", session_info, "read", "this browser session: who, its scope, its CSRF token",
             response=SessionOut),
    Endpoint("GET", "/api/openapi.json", openapi, "read", "this document", response=dict[str, Any]),
    Endpoint("GET", "/api/status", status, "read", "the daemon's status, read from its journal: trading state,"
             " position in the journal, whether a daemon holds it", (Param("journal", str, "another journal than"
             " the live one (web.journal)", ""),), response=Status),
    Endpoint("GET", "/api/journals", list_journals, "read", "the journals, and which are held by a running daemon",
             response=list[JournalEntry]),
    Endpoint("GET", "/api/journals/{name}/events", events, "read", "a page of a journal's events", (
        Param("from_seq", int, "the first sequence number", 1), Param("limit", int, "at most this many (up to 1000)", 100),
        Param("kinds", str, "only these kinds, separated by commas (QuoteTick,OrderFilled,...)", ""),
        Param("last", bool, "the last page instead: the newest `limit` events from `from_seq` on", False),
    ), response=EventsPage),
    Endpoint("GET", "/api/journals/{name}/state", state, "read", "how far the gateway's kernel of the journal is,"
             " and its trading state", response=ViewState),
    Endpoint("GET", "/api/journals/{name}/positions", positions, "read", "open positions with average price, mark"
             " and PnL", response=list[PositionOut]),
    Endpoint("GET", "/api/journals/{name}/orders", orders, "read", "the last orders", (
        Param("open", bool, "only working ones", False), Param("n", int, "how many (up to 1000)", 50),
    ), response=list[OrderOut]),
    Endpoint("GET", "/api/journals/{name}/fills", fills, "read", "the last fills (up to 500)", response=list[FillOut]),
    Endpoint("GET", "/api/journals/{name}/pnl", pnl, "read", "realised and unrealised PnL, commissions, equity,"
             " peak and drawdown", response=PnlOut),
    Endpoint("GET", "/api/journals/{name}/risk", risk, "read", "limits and their usage, breakers, paused"
             " instruments and strategies", response=dict[str, Any]),
    Endpoint("GET", "/api/journals/{name}/summary", summary, "read", "the journal's summary (all its runs), as"
             " `foxhunt replay` prints it", response=dict[str, Any]),
    Endpoint("GET", "/api/journals/{name}/runs", runs, "read", "the journal's runs: how each started and stopped,"
             " and its inputs, fills and PnL", response=list[RunOut]),
    Endpoint("GET", "/api/journals/{name}/models", models, "read", "the models that scored and the agents that decided"
             " in the journal: parameter hashes, latency percentiles, failures", response=dict[str, Any]),
    Endpoint("GET", "/api/journals/{name}/bars", bars, "read", "one-second bars of each symbol's mid price (the"
             " last 2000)", response=list[BarsOut]),
    Endpoint("GET", "/api/journals/{name}/report", report, "read", "the run's HTML report", response="text/html"),
    Endpoint("POST", "/api/commands", command, "operate", "send the daemon a command that changes its state;"
             " journaled with your name and the reason", body=CommandIn, response=CommandOut),
)


def _parse_query(request: Request, params: tuple[Param, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in params:
        text = request.query_params.get(p.name)
        if text is None:
            if p.default is None:
                raise HttpError(400, f"query parameter {p.name} is required: {p.help}")
            out[p.name] = p.default
        elif p.kind is int:
            if not _whole(text):
                raise HttpError(400, f"query parameter {p.name}: a whole number, got {text[:40]!r}")
            out[p.name] = int(text)
        elif p.kind is bool:
            if text.lower() not in ("1", "0", "true", "false"):
                raise HttpError(400, f"query parameter {p.name}: true or false, got {text[:40]!r}")
            out[p.name] = text.lower() in ("1", "true")
        elif not text.isprintable():
            raise HttpError(400, f"query parameter {p.name}: a control character in {text[:40]!r}")
        else:
            out[p.name] = text
    unknown = set(request.query_params) - {p.name for p in params}
    if unknown:
        raise HttpError(400, f"unknown query parameter {min(unknown)!r}"
                             f"{'; this route takes ' + ', '.join(p.name for p in params) if params else ''}")
    return out


def _whole(text: str) -> bool:
    """A whole number written in ASCII digits, as int() reads it without a doubt: str.isdigit() also takes
    '²' and '٣', which int() refuses or reads as another digit."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()


def _json(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(value), status, headers, media_type="application/json")


MAX_BODY = 64 * 1024


async def _body(request: Request) -> bytes:
    """A request's JSON body, refused before it is read whole when it is larger than MAX_BODY (413), and
    refused when it is not declared `application/json` (415): a form on another site can send text/plain
    (or url-encoded) without asking, but a browser sends application/json across sites only after a CORS
    preflight, which this server never grants (a login CSRF would otherwise post the attacker's token)."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":
        raise HttpError(415, f"request body: send it as Content-Type: application/json, not {media or 'nothing'!r}")
    declared = request.headers.get("content-length", "")
    if _whole(declared) and int(declared) > MAX_BODY:
        raise HttpError(413, f"request body of {declared} bytes: at most {MAX_BODY}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HttpError(413, f"request body larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _route(gw: Gateway, endpoint: Endpoint) -> Route:
    decoder = msgspec.json.Decoder(endpoint.body) if endpoint.body is not None else None
    unsafe = endpoint.method != "GET"

    async def handle(request: Request) -> Response:
        try:
            who = await gw.principal(request, unsafe) if endpoint.scope is not None else None
            if who is not None and not who.may(endpoint.scope):
                raise HttpError(403, f"{endpoint.method} {endpoint.path} needs the {endpoint.scope} scope; the"
                                     f" token of {who.name} has {who.scope}")
            name = request.path_params.get("name")
            if name is not None and not name.isprintable():
                raise HttpError(400, f"journal name: a control character in {name[:40]!r}")
            q = _parse_query(request, endpoint.query)
            body = None
            if decoder is not None:
                try:
                    body = decoder.decode(await _body(request))
                except msgspec.DecodeError as e:
                    raise HttpError(400, f"request body: {e}") from None
            result = await endpoint.handler(gw, request, who, q, body)
            return result if isinstance(result, Response) else _json(result)
        except HttpError as e:
            return _json(ErrorOut(str(e)), e.status, e.headers)
        except JournalNotFound as e:
            return _json(ErrorOut(str(e)), 404)
        except JournalUnavailable as e:
            log.warning("web_database_unavailable", path=request.url.path, error=str(e))
            return _json(ErrorOut(str(e)), 503)
        except (JournalError, ConfigError) as e:
            return _json(ErrorOut(str(e)), 409)

    return Route(endpoint.path, handle, methods=[endpoint.method])


# --- WebSockets ----------------------------------------------------------------------------------

REVOKED = 4401  # a stream's close code when its token is revoked or its session ends (HTTP's 401, in the
# range RFC 6455 leaves to applications)
RECHECK_S = 1.0  # how often an open stream's credentials are checked again


async def _accepted(gw: Gateway, ws: WebSocket) -> Principal | None:
    """The principal of a WebSocket, or None after refusing its handshake (HTTP 403, as the protocol allows:
    a browser sees only that it failed, a script its status)."""
    try:
        return await gw.principal(ws, unsafe=True)
    except HttpError as e:
        log.warning("web_socket_refused", path=ws.url.path, why=str(e))
        await ws.close(code=1008, reason=str(e)[:120])
        return None


async def stream(gw: Gateway, ws: WebSocket) -> None:
    """A journal's events from `from_seq` on, a frame a page: {"events": [...], "next_seq": N}. A client that
    reconnects with `from_seq` = the last `next_seq` it got misses nothing and sees nothing twice; `kinds`
    keeps only those (the frame's next_seq still counts every event passed)."""
    if (who := await _accepted(gw, ws)) is None:
        return
    name = ws.path_params["name"]
    text = ws.query_params.get("from_seq", "1")
    kinds = set(_kinds(ws.query_params.get("kinds", "")))
    await ws.accept()
    if not _whole(text):
        await ws.close(code=1008, reason=f"from_seq: a whole number, got {text[:40]!r}")
        return

    async def send() -> None:
        assert gw.journals is not None
        try:
            async with gw.journals.following(name) as follower:
                pages = follower.follow(gw.store, max(1, int(text)))
                async with contextlib.aclosing(pages):
                    async for page in pages:  # each event's JSON made once, by whoever read it
                        chosen = [data if data is not None else encoded(r, kind)
                                  for r, kind, data in page if not kinds or kind in kinds]
                        await ws.send_bytes(b'{"events":[%s],"next_seq":%d}' % (b",".join(chosen), page[-1][0].seq + 1))
        except JournalError as e:
            await ws.close(code=1008 if isinstance(e, JournalNotFound) else 1011, reason=str(e)[:120])

    await _while_connected(gw, ws, who, send)


async def _while_connected(gw: Gateway, ws: WebSocket, who: Principal, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` (which only sends) until it ends, the client goes, or its credentials end: a client that
    leaves while a quiet journal has nothing to send must not keep its reader, and its database connection,
    alive; a revoked token, a logout or an expired session closes the stream (REVOKED) within RECHECK_S."""
    session_id = None if ws.headers.get("authorization") else ws.cookies.get(gw.cookie)
    async with anyio.create_task_group() as tg:
        async def watch() -> None:
            while (await ws.receive())["type"] != "websocket.disconnect":
                pass  # what a client sends is not read: the streams take no requests
            tg.cancel_scope.cancel()

        async def guard() -> None:
            while True:
                await anyio.sleep(RECHECK_S)
                why = await gw.no_longer_allowed(who, session_id)
                if why is not None:
                    log.info("web_stream_closed", name=who.name, why=why)
                    with contextlib.suppress(Exception):  # the client may be gone already
                        await ws.close(code=REVOKED, reason=why)
                    tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(guard)
        try:
            await work()
        except (WebSocketDisconnect, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        tg.cancel_scope.cancel()


async def status_stream(gw: Gateway, ws: WebSocket) -> None:
    """The daemon's status (as GET /api/status) each time its journal moves on, at most four times a second."""
    if (who := await _accepted(gw, ws)) is None:
        return
    name = ws.query_params.get("journal") or gw.web.journal
    await ws.accept()
    if not name:
        await ws.close(code=1008, reason="no live journal is configured (web.journal); ask with ?journal=NAME")
        return

    async def send() -> None:
        try:
            while True:
                view = await gw.view(name)
                changed = view.changed
                await ws.send_bytes(msgspec.json.encode(await _status(gw, name)))
                await anyio.sleep(0.25)
                with anyio.move_on_after(5.0):  # at least every 5 s: a daemon that stops shows as stopped
                    await changed.wait()
        except (JournalError, HttpError) as e:
            await ws.close(code=1008 if isinstance(e, JournalNotFound) else 1011, reason=str(e)[:120])

    await _while_connected(gw, ws, who, send)


def _socket_route(gw: Gateway, path: str, fn: Callable[[Gateway, WebSocket], Awaitable[None]]) -> WebSocketRoute:
    async def handle(ws: WebSocket) -> None:
        await fn(gw, ws)

    return WebSocketRoute(path, handle)


# --- the OpenAPI document ------------------------------------------------------------------------

def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1 of ENDPOINTS: msgspec writes the JSON Schemas of the bodies and responses."""
    types = [e.body for e in ENDPOINTS if e.body is not None] + [e.response for e in ENDPOINTS
                                                                  if e.response is not None and not isinstance(e.response, str)]
    schemas, components = msgspec.json.schema_components(types + [ErrorOut], ref_template="#/components/schemas/{name}")
    by_type = dict(zip(types, schemas[:len(types)], strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        op: dict[str, Any] = {"summary": e.summary, "operationId": e.handler.__name__}
        params = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"},
                   "description": NAME.help}] if "{name}" in e.path else []
        params += [{"name": p.name, "in": "query", "required": p.default is None, "description": p.help,
                    "schema": {"type": {int: "integer", bool: "boolean", str: "string"}[p.kind],
                               **({} if p.default is None else {"default": p.default})}} for p in e.query]
        if params:
            op["parameters"] = params
        if e.body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": by_type[e.body]}}}
        content = ({e.response: {"schema": {"type": "string"}}} if isinstance(e.response, str)
                   else {"application/json": {"schema": by_type[e.response]}})
        error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
        op["responses"] = {"200": {"description": "done", "content": content},
                           **{str(code): {"description": what, **error} for code, what in (
                               (400, "bad input, named"), (401, "no or bad credentials"),
                               (403, "not allowed: scope, CSRF or origin"), (404, "no such journal"),
                               (409, "the daemon refused"), (503, "PostgreSQL or the daemon cannot be reached"))}}
        if e.body is not None:
            op["responses"]["413"] = {"description": f"request body larger than {MAX_BODY} bytes", **error}
            op["responses"]["415"] = {"description": "request body not sent as application/json", **error}
        if e.path == "/api/login":
            op["responses"]["429"] = {"description": "too many failed logins from this client", **error}
        op["security"] = [] if e.scope is None else [{"bearer": []}, {"session": []}]
        if e.scope == "operate":
            op["description"] = "Needs the operate scope; a browser session also sends X-CSRF-Token."
        paths.setdefault(e.path, {})[e.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "foxhunt web gateway", "version": "1",
                 "description": "Journals read from PostgreSQL; commands forwarded to the daemon's admin socket."
                                " WebSockets: /api/journals/{name}/stream?from_seq=N&kinds=A,B and"
                                " /api/status/stream?journal=NAME."},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer", "description": "a token of `foxhunt web token add`"},
            "session": {"type": "apiKey", "in": "cookie", "name": COOKIE,
                        "description": f"{SECURE_COOKIE} behind TLS (web.secure_cookies)"},
        }},
    }


OPENAPI = openapi_document()


# --- the application -----------------------------------------------------------------------------

async def _index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html")


def build_app(gw: Gateway) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            gw.journals = Journals(gw.store, gw.db, tg, gw.web.views, gw.web.journal)
            log.info("web_started", live_journal=gw.web.journal or None)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()  # the followers and views
        await gw.db.aclose()  # outside the cancelled scope, or the close would be cancelled too
        log.info("web_stopped")

    routes = [_route(gw, e) for e in ENDPOINTS] + [
        _socket_route(gw, "/api/journals/{name}/stream", stream),
        _socket_route(gw, "/api/status/stream", status_stream),
        Route("/", _index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan,
                     middleware=[Middleware(HostCheck, hosts=gw.web.hosts()), Middleware(SecurityHeaders)])


class HostCheck:
    """Refuses a request or WebSocket whose Host header is not one this gateway serves (web.allowed_hosts):
    a page of another site whose name resolves to this address (DNS rebinding) is same-origin with itself,
    so the Origin check passes; only the Host it sends gives it away."""

    def __init__(self, app: Callable[..., Awaitable[None]], hosts: frozenset[str] | None) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if self.hosts is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
        if host in self.hosts or host.rpartition(":")[0] in self.hosts:
            await self.app(scope, receive, send)
            return
        log.warning("web_host_refused", host=host[:100])
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "not a host this gateway serves"})
            return
        body = msgspec.json.encode(ErrorOut(f"Host {host[:100]!r} is not one this gateway serves (web.allowed_hosts)"))
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """Adds SECURITY_HEADERS (and no caching) to every HTTP response that does not set its own."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in (*SECURITY_HEADERS.items(), ("cache-control", "no-store"))
                         if k.encode() not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
