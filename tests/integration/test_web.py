"""The web gateway end to end: a paper daemon (`foxhunt run`, the embedded test PostgreSQL) and `foxhunt web
serve` as two real processes, spoken to over HTTP and WebSockets and driven in Debian's Chromium.

- every GET route answers in the shape its OpenAPI schema declares;
- a command from the web is journaled with the web user's name and the gateway's uid, through the admin socket;
- no credentials, a wrong token, a revoked token, a read token sending a command, a session's request without its
  CSRF token or from another origin, and a WebSocket from another origin are refused; logins are rate-limited;
- the event stream, dropped and resumed from its last `next_seq`, misses nothing and repeats nothing;
- once the daemon stops, the gateway's kernel is in the state replay --verify reaches (same state digest);
- in a browser: log in, watch the chart move as quotes arrive, halt with a reason, find it in the journal.
  Screenshots stay in the test's directory (and FOXHUNT_TEST_ARTIFACTS where set).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import msgspec
import psycopg
import pytest
import websockets.sync.client as ws_client
from websockets.exceptions import ConnectionClosed, InvalidStatus

from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.admin.client import Connection
from foxhunt.messages.market import QuoteTick
from foxhunt.web.app import ENDPOINTS
from tests.browser import chromium_page, keep
from tests.integration.test_daemon_ops import journal_messages

pytestmark = pytest.mark.postgres

CONFIG = """
[admin]
socket = "{place}/admin.sock"
allowed_users = ["{me}"]
gateway_users = ["{me}"]
[web]
listen = "127.0.0.1:{port}"
journal = "{journal}"
login_attempts = 3
login_window = 3.0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(env, config: Path, *argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "foxhunt", *argv, "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def token(env, config: Path, name: str, scope: str) -> str:
    out = cli(env, config, "web", "token", "add", name, "--scope", scope)
    return re.search(r"^fht_\S+$", out, re.MULTILINE).group(0)


def wait_until(what: str, check, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(every)


class Site:
    """The daemon, the gateway, and the tokens of alice (operate) and bob (read)."""

    def __init__(self, place: Path, env: dict[str, str], journal: str, dsn: str) -> None:
        self.place, self.env, self.journal, self.dsn = place, env, journal, dsn
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.config = place / "foxhunt.toml"
        me = pwd.getpwuid(os.geteuid()).pw_name
        self.config.write_text(CONFIG.format(place=place, me=me, port=self.port, journal=journal))
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str, *argv: str) -> subprocess.Popen:
        with (self.place / f"{name}.log").open("w") as log:  # the process keeps its own copy
            process = subprocess.Popen([sys.executable, "-m", "foxhunt", *argv, "--config", str(self.config),
                                        "--log-level", "info"], env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.place / f"{name}.log").read_text()

    def client(self, token: str | None = None, **kw) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60, **kw)

    def admin(self, *argv: str) -> dict:
        conn = Connection(self.place / "admin.sock", timeout=20)
        try:
            reply = conn.ask(list(argv))
        finally:
            conn.close()
        assert reply.ok, reply.error
        return reply.result


@pytest.fixture(scope="module")
def site(state_dir, pg_dsn):
    place = Path(tempfile.mkdtemp(prefix="fh-web-", dir="/tmp"))
    env = dict(os.environ, FOXHUNT_STATE_DIR=str(state_dir))
    env.pop("FOXHUNT_DSN", None)
    s = Site(place, env, f"web-{os.getpid()}-{time.time_ns() % 10**9}", pg_dsn)
    daemon = s.start("daemon", "run", "--journal", s.journal, "--feed", "synthetic:seed=3,n=1000000000,rate=1500")
    try:
        wait_until("the daemon's admin socket", lambda: (daemon.poll() is None or pytest.fail(s.log("daemon")))
                   and (s.place / "admin.sock").exists(), 120)
        wait_until("the daemon trading", lambda: s.admin("status")["last_seq"] > 100, 60)
        s.alice, s.bob = token(env, s.config, "alice", "operate"), token(env, s.config, "bob", "read")
        s.web = s.start("web", "web", "serve")

        def up():
            assert s.web.poll() is None, s.log("web")
            try:
                return httpx.get(f"{s.base}/api/journals", timeout=2).status_code == 401
            except httpx.TransportError:
                return False

        wait_until("the gateway listening", up, 60)
        s.daemon = daemon
        yield s
    finally:
        for process in s.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in s.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(place, ignore_errors=True)


def caught_up(s: Site, http: httpx.Client, seq: int) -> dict:
    return wait_until(f"the gateway's kernel at seq {seq}",
                      lambda: (v := http.get(f"/api/journals/{s.journal}/state").json())["seq"] >= seq and v)


def test_every_route_answers_in_its_declared_shape_from_the_journal(site):
    s = site
    with s.client(s.bob) as http:
        journals = http.get("/api/journals").json()
        mine = next(j for j in journals if j["name"] == s.journal)
        assert mine["writer"] == "foxhunt writer" or mine["writer"], mine  # the daemon holds it
        caught_up(s, http, s.admin("status")["committed_seq"])
        checked = 0
        for e in ENDPOINTS:
            if e.method != "GET" or e.path == "/api/session" or isinstance(e.response, str):
                continue
            got = http.get(e.path.replace("{name}", s.journal))
            assert got.status_code == 200, (e.path, got.text)
            msgspec.convert(got.json(), e.response)  # the OpenAPI schema's type, strictly
            checked += 1
        assert checked >= 13
        status = http.get("/api/status").json()
        assert status["journal"] == s.journal and status["writer"] and status["view"]["trading_state"] == "ACTIVE"
        page = http.get(f"/api/journals/{s.journal}/events", params={"limit": 5, "kinds": "RunStarted"}).json()
        assert [e["kind"] for e in page["events"]] == ["RunStarted"] and page["next_seq"] > 1
        bars = http.get(f"/api/journals/{s.journal}/bars").json()
        assert bars and len(bars[0]["bars"]) >= 1
        runs = http.get(f"/api/journals/{s.journal}/runs").json()  # one run, still going, seen whole
        assert len(runs) == 1 and runs[0]["stopped_seq"] is None and runs[0]["fingerprint"]["kernel"], runs
        assert runs[0]["summary"]["so_far"] and runs[0]["summary"]["inputs"] > 0 and runs[0]["summary"]["fills"] > 0
        report = http.get(f"/api/journals/{s.journal}/report")
        assert report.status_code == 200 and "plotly" in report.text and report.headers["content-type"].startswith("text/html")
        doc = http.get("/api/openapi.json").json()
        assert doc["openapi"] == "3.1.0" and "/api/commands" in doc["paths"] and "CommandIn" in doc["components"]["schemas"]
        # bad input is named
        assert http.get("/api/journals/nope/positions").status_code == 404
        bad = http.get(f"/api/journals/{s.journal}/events", params={"from_seq": "x"})
        assert bad.status_code == 400 and "from_seq" in bad.json()["error"]
        bad = http.get(f"/api/journals/{s.journal}/orders", params={"colour": "red"})
        assert bad.status_code == 400 and "'colour'" in bad.json()["error"]


def test_a_command_from_the_web_is_journaled_with_the_web_users_name(site):
    s = site
    with s.client(s.alice) as alice, s.client(s.bob) as bob:
        denied = bob.post("/api/commands", json={"command": "halt", "reason": "bob tries"})
        assert denied.status_code == 403 and "operate scope" in denied.json()["error"]
        assert alice.post("/api/commands", json={"command": "status", "reason": "x"}).status_code == 400
        empty = alice.post("/api/commands", json={"command": "halt", "reason": " "})
        assert empty.status_code == 400 and "needs --reason" in empty.json()["error"]
        assert alice.post("/api/commands", json={"command": "halt"}).status_code == 400  # no reason field
        halted = alice.post("/api/commands", json={"command": "halt", "reason": "web drill"})
        assert halted.status_code == 200, halted.text
        assert halted.json()["trading_state"] == "HALTED"
        wait_until("HALTED on the web", lambda: caught_up(s, alice, halted.json()["seq"])["trading_state"] == "HALTED")
        resumed = alice.post("/api/commands", json={"command": "resume", "reason": "drill over"})
        assert resumed.json()["trading_state"] == "ACTIVE"
    commands = [m for m in journal_messages(s.dsn, s.journal) if type(m).__name__ == "AdminCommand"]
    assert [(c.command, c.operator, c.operator_uid, c.reason) for c in commands][-2:] == [
        ("halt", "web:alice", os.geteuid(), "web drill"), ("resume", "web:alice", os.geteuid(), "drill over")]


def test_refusals_anonymous_wrong_scope_revoked_forged_and_too_many_logins(site):
    s = site
    with s.client() as anon:
        assert anon.get("/api/journals").status_code == 401
        assert anon.get("/api/openapi.json").status_code == 401
        assert anon.post("/api/commands", json={"command": "halt", "reason": "x"}).status_code == 401
        assert anon.get("/", follow_redirects=False).status_code == 200  # the page itself, which asks to log in
    with s.client("fht_not-a-real-token") as wrong:
        assert wrong.get("/api/journals").status_code == 401
    with s.client("Basic abc") as odd:
        odd.headers["authorization"] = "Basic abc"
        assert "Bearer" in odd.get("/api/journals").json()["error"]
    carol = token(s.env, s.config, "carol", "operate")
    with s.client(carol) as http:
        assert http.get("/api/journals").status_code == 200
        cli(s.env, s.config, "web", "token", "revoke", "carol")
        # the gateway reads the live tokens again at least once a second (tokens.py)
        wait_until("the revoked token refused", lambda: http.get("/api/journals").status_code == 401, 3)
    listed = cli(s.env, s.config, "web", "token", "list")
    assert "carol" in listed and "revoked" in listed and "fht_" not in listed

    # a browser session: the cookie alone does not send a command
    with s.client() as browser:
        session = browser.post("/api/login", json={"token": s.alice}).json()
        cookie = browser.cookies.get("foxhunt_session")
        assert cookie and session["name"] == "alice" and session["csrf"]
        assert browser.get("/api/journals").status_code == 200
        body = {"command": "reduce", "reason": "csrf check"}
        no_csrf = browser.post("/api/commands", json=body, headers={"origin": s.base})
        assert no_csrf.status_code == 403 and "X-CSRF-Token" in no_csrf.json()["error"]
        forged = browser.post("/api/commands", json=body, headers={"origin": "https://evil.example", "x-csrf-token": session["csrf"]})
        assert forged.status_code == 403 and "Origin" in forged.json()["error"]
        # a WebSocket opened with the cookie from another site's page
        with pytest.raises(InvalidStatus), ws_client.connect(
                f"ws://127.0.0.1:{s.port}/api/status/stream", origin="https://evil.example",
                additional_headers={"cookie": f"foxhunt_session={cookie}"}, open_timeout=10):
            pass
        with pytest.raises(InvalidStatus), ws_client.connect(f"ws://127.0.0.1:{s.port}/api/status/stream", open_timeout=10):
            pass
        good = browser.post("/api/commands", json=body, headers={"origin": s.base, "x-csrf-token": session["csrf"]})
        assert good.status_code == 200 and good.json()["trading_state"] == "REDUCING"
        back = browser.post("/api/commands", json={"command": "resume", "reason": "csrf check done"},
                            headers={"origin": s.base, "x-csrf-token": session["csrf"]})
        assert back.json()["trading_state"] == "ACTIVE"
        assert browser.post("/api/logout", headers={"origin": s.base, "x-csrf-token": session["csrf"]}).status_code == 200
        assert browser.get("/api/journals").status_code == 401

    time.sleep(3.1)  # the wrong and revoked tokens above count as failed logins too: let their window pass
    with s.client() as guesser:
        codes = [guesser.post("/api/login", json={"token": f"fht_guess{i}"}).status_code for i in range(4)]
        assert codes == [401, 401, 401, 429]
        limited = guesser.post("/api/login", json={"token": "fht_guess5"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        with s.client("fht_guess6") as script:  # a wrong token sent with a request is held back as well
            assert script.get("/api/journals").status_code == 429
        # a live token from the same address is not: the junk of someone behind the same proxy or NAT
        # must not lock an operator out (nobody guesses a token of 256 bits)
        assert guesser.post("/api/login", json={"token": s.alice}).status_code == 200
        with s.client(s.alice) as script:
            assert script.get("/api/journals").status_code == 200
    assert '"event":"web_login_limited"' in s.log("web")


def test_the_event_stream_resumes_after_a_dropped_connection_with_no_gap_or_repeat(site):
    s = site
    headers = {"authorization": f"Bearer {s.bob}"}
    followers = tails(s)  # the gateway's own, following the journal for its kernel
    seqs: list[int] = []
    next_seq = 1
    for _ in range(3):  # three connections, each dropped without a goodbye after a few frames
        with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/{s.journal}/stream?from_seq={next_seq}",
                               additional_headers=headers, open_timeout=10, max_size=2**24) as conn:
            for _ in range(4):
                frame = json.loads(conn.recv(timeout=30))
                seqs += [e["seq"] for e in frame["events"]]
                next_seq = frame["next_seq"]
            conn.socket.shutdown(socket.SHUT_RDWR)  # dropped, as a network drops it: no closing handshake
    assert seqs == list(range(1, len(seqs) + 1)) and next_seq == len(seqs) + 1
    # a filtered stream counts what it passed over: resuming from its next_seq repeats nothing either
    with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/{s.journal}/stream?from_seq=1&kinds=AdminCommand",
                           additional_headers=headers, open_timeout=10, max_size=2**24) as conn:
        frame = json.loads(conn.recv(timeout=30))
        assert all(e["kind"] == "AdminCommand" for e in frame["events"]) and frame["next_seq"] > 1
    # a journal that does not exist: the stream says so and closes
    with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/no-such-journal/stream",
                           additional_headers=headers, open_timeout=10) as conn:
        with pytest.raises(ConnectionClosed) as closed:
            conn.recv(timeout=30)
        assert closed.value.rcvd.code == 1008 and "no-such-journal" in closed.value.rcvd.reason
    # a quiet journal, which gives a reader nothing to send: a client that leaves still frees its reader
    quiet = f"{s.journal}-quiet"
    anyio.run(write_one, s.dsn, quiet)
    with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/{quiet}/stream?from_seq=1",
                           additional_headers=headers, open_timeout=10) as conn:
        assert [e["seq"] for e in json.loads(conn.recv(timeout=30))["events"]] == [1]
        conn.socket.shutdown(socket.SHUT_RDWR)
    # the dropped clients' readers let go of their database connections
    wait_until("the streams' readers gone", lambda: tails(s) == followers, 30)


async def write_one(dsn: str, name: str) -> None:
    store = PostgresJournalStore(dsn)
    async with store.writer(name, config=b"{}", config_digest="test", fingerprint={}) as writer:
        writer.append(QuoteTick(ts_event=1, ts_init=1, symbol="EURUSD", bid=1, ask=2))


def tails(s: Site) -> int:
    with psycopg.connect(s.dsn) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'foxhunt tail'").fetchone()[0]


def test_the_dashboard_in_a_browser_charts_quotes_and_halts_with_a_reason(site, tmp_path):
    s = site
    with chromium_page(1400, 1000) as (page, errors):
        page.goto(s.base + "/")
        page.fill("#token", s.alice)
        page.click("#login-form button")
        page.wait_for_function("() => window.foxhunt.quotes > 0 && document.querySelector('#chart canvas')",
                               timeout=60_000)
        first = page.evaluate("window.foxhunt.quotes")
        last_bar = page.evaluate("(() => { const b = window.foxhunt.bars.get(window.foxhunt.symbol); return b[b.length - 1].time })()")
        page.wait_for_function(f"() => window.foxhunt.quotes > {first} + 100", timeout=30_000)  # the chart keeps moving
        page.wait_for_function(f"() => {{ const b = window.foxhunt.bars.get(window.foxhunt.symbol);"
                               f" return b[b.length - 1].time > {last_bar} }}", timeout=30_000)
        page.wait_for_function("() => document.querySelector('#state').textContent === 'ACTIVE'", timeout=30_000)
        # the strategy's orders and fills are marked on the chart (dots and arrows, from the journal's events)
        page.wait_for_function("() => window.foxhunt.orderMarks.length > 0 && window.foxhunt.fillMarks.length > 0",
                               timeout=30_000)
        assert page.evaluate("window.foxhunt.orderMarks[0].shape") == "circle"
        assert page.evaluate("window.foxhunt.runs.length") == 1  # the runs panel: the daemon's one run
        assert "not stopped" in page.inner_text("#runs")
        # a working limit order is a line at its price (ema_cross sends market orders: one drawn here by hand)
        drawn = page.evaluate("(() => { drawOrderLines([{ symbol: window.foxhunt.symbol, price: '1.1', side: 'BUY',"
                              " quantity: '1000', order_id: 'o-1' }]); return window.foxhunt.priceLines.map("
                              "(l) => [l.options().price, l.options().title]) })()")
        assert drawn == [[1.1, "BUY 1000 o-1"]]
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        page.click("#controls button[data-command=halt]")  # no reason yet: asked for one, nothing sent
        assert "needs a reason" in page.inner_text("#command-result")
        page.fill("#reason", "spreads too wide (browser)")
        page.click("#controls button[data-command=halt]")
        page.wait_for_function("() => document.querySelector('#state').textContent === 'HALTED'", timeout=30_000)
        assert "journaled at seq" in page.inner_text("#command-result")
        # the journaled command, as the event stream brings it (the tape's 60 lines may have moved past it)
        page.wait_for_function("() => document.querySelector('#last-command').textContent.includes('spreads too wide')",
                               timeout=30_000)
        assert "halt by web:alice" in page.inner_text("#last-command")
        page.screenshot(path=str(tmp_path / "dashboard-halted.png"), full_page=True)
        page.fill("#reason", "calm again (browser)")
        page.click("#controls button[data-command=resume]")
        page.wait_for_function("() => document.querySelector('#state').textContent === 'ACTIVE'", timeout=30_000)
    # the one error expected: the page asking whether it has a session, before logging in
    assert errors == ["Failed to load resource: the server responded with a status of 401 (Unauthorized)"], "\n".join(errors)
    halts = [m for m in journal_messages(s.dsn, s.journal) if type(m).__name__ == "AdminCommand" and m.command == "halt"]
    assert (halts[-1].operator, halts[-1].reason) == ("web:alice", "spreads too wide (browser)")
    assert (tmp_path / "dashboard.png").stat().st_size > 20_000
    keep(tmp_path / "dashboard.png", tmp_path / "dashboard-halted.png")


def test_after_the_daemon_stops_the_gateway_shows_the_state_replay_reaches(site):
    s = site
    s.daemon.send_signal(signal.SIGTERM)
    assert s.daemon.wait(timeout=60) == 0, s.log("daemon")[-3000:]
    with psycopg.connect(s.dsn) as conn:
        last = conn.execute("SELECT max(e.seq) FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s",
                            (s.journal,)).fetchone()[0]
    verified = json.loads(cli(s.env, s.config, "replay", s.journal, "--verify", "--json"))
    with s.client(s.bob) as http:
        caught_up(s, http, last)
        shown = http.get(f"/api/journals/{s.journal}/summary").json()
        assert http.get("/api/status").json()["writer"] is None  # nobody holds the journal now
    assert shown["state_digest"] == verified["state_digest"]
    assert (shown["positions"], shown["pnl"], shown["fills"]) == (verified["positions"], verified["pnl"], verified["fills"])


def test_a_view_starts_from_the_journals_newest_snapshot_and_reaches_the_state_replay_does(site, tmp_path):
    """A journal with a kernel snapshot is shown from it (and the inputs after it), not from its first input,
    with the dashboard's bars from the records before it; the state is still exactly verify's."""
    s = site
    journal = f"{s.journal}-snapped"
    config = tmp_path / "foxhunt.toml"  # the site's, with an admin socket of its own (its daemon may still run)
    config.write_text(s.config.read_text().replace("admin.sock", "admin-snapped.sock"))
    run = ("run", "--journal", journal, "--clock", "feed", "--json")
    cli(s.env, config, *run, "--feed", "synthetic:seed=4,n=3000")
    snapped = cli(s.env, config, "journal", "snapshot", journal)
    snapshot_seq, snapshot_inputs = map(int, re.search(r"seq (\d+)\t(\d+) inputs", snapped).groups())
    cli(s.env, config, *run, "--feed", "synthetic:seed=6,n=2000")  # a second run, after the snapshot
    with psycopg.connect(s.dsn) as conn:
        last = conn.execute("SELECT max(e.seq) FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s",
                            (journal,)).fetchone()[0]
    assert last > snapshot_seq + 2000
    verified = json.loads(cli(s.env, config, "replay", journal, "--verify", "--json"))
    with s.client(s.bob) as http:
        state = wait_until(f"the view of {journal} at seq {last}",
                           lambda: (v := http.get(f"/api/journals/{journal}/state").json())["seq"] >= last and v)
        shown = http.get(f"/api/journals/{journal}/summary").json()
        bars = http.get(f"/api/journals/{journal}/bars").json()
        runs = http.get(f"/api/journals/{journal}/runs").json()
    assert state["snapshot_seq"] == snapshot_seq and state["ready"]
    # two runs, both stopped; the first lies before the snapshot (no summary), the second is summed up to now
    assert [r["started_seq"] < snapshot_seq for r in runs] == [True, False], runs
    assert all(r["stop_reason"] and r["stopped_seq"] > r["started_seq"] for r in runs), runs
    assert runs[0]["summary"] is None
    assert runs[1]["summary"]["so_far"] and runs[1]["summary"]["inputs"] == state["inputs"] - snapshot_inputs
    assert state["inputs"] == verified["inputs"], (state, verified)
    assert shown["state_digest"] == verified["state_digest"]
    first_bar = min(bar[0] for b in bars for bar in b["bars"])
    first_quote_s = next(m.ts_event for m in journal_messages(s.dsn, journal) if type(m).__name__ == "QuoteTick") // 10**9
    assert first_bar == first_quote_s  # the bars from before the snapshot are drawn too (HISTORY covers them all)
