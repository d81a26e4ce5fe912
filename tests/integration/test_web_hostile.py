"""The web gateway attacked as an outsider, a read-only user and a careless operator would (issue 63's
cases): a paper daemon and `foxhunt web serve` as real processes, spoken to over HTTP, WebSockets and raw
sockets, and driven in Debian's Chromium.

- a journal whose text carries script (an instrument's currency) runs none of it in its report, opened from
  the dashboard or as a file: no command is sent, the page's title is untouched;
- a revoked token's and a logged-out session's open streams close (4401), and a dashboard says so;
- a dashboard shows that it is stale while its gateway is away, and asks to log in again after a restart;
- junk tokens from an address do not lock out a live token from it; a read token's logins do not end an
  operator's session;
- a report is made off the event loop (the status answers meanwhile), one at a time per user, and kept;
- lagging streams share a capped number of database connections;
- a login body is refused before it is read whole, and only as application/json from this site;
- query parameters in any script (Unicode digits among them) are refused by name, never a 500.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import socket
import threading
import time

import httpx
import psycopg
import pytest
import websockets.sync.client as ws_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidStatus

from foxhunt.web.app import ENDPOINTS, REVOKED
from foxhunt.web.journals import CATCH_UP_READERS
from tests.browser import chromium_page
from tests.integration.test_daemon_ops import journal_messages
from tests.integration.test_web import cli, site, token, wait_until  # noqa: F401  (site: the module's fixture)

pytestmark = pytest.mark.postgres

# what the planted script would do: read the session's CSRF token and halt the daemon as the viewer
PLANTED = ("fetch('/api/session').then(r=>r.json()).then(s=>fetch('/api/commands',{method:'POST',headers:"
           "{'content-type':'application/json','x-csrf-token':s.csrf},body:JSON.stringify({command:'halt',"
           "reason:'planted'})}));document.title='pwned'")
CURRENCY = f"<img src=x onerror=eval(atob('{base64.b64encode(PLANTED.encode()).decode()}'))>"


@pytest.fixture(scope="module")
def hostile(site):
    """A journal recorded with an instrument whose currency is a script, long enough that its report takes
    a while to make."""
    name = f"{site.journal}-hostile"
    config = site.place / "hostile.toml"  # an admin socket of its own: the site's daemon runs
    config.write_text(site.config.read_text().replace("admin.sock", "admin-hostile.sock"))
    cli(site.env, config, "run", "--journal", name, "--clock", "feed", "--feed", "synthetic:seed=5,n=30000,symbol=XSS",
        "--instrument", f"XSS:tick_size=0.00001,lot_size=1000,currency={CURRENCY}")
    return name


def planted_halts(s) -> list:
    return [m for m in journal_messages(s.dsn, s.journal)
            if type(m).__name__ == "AdminCommand" and m.reason == "planted"]


def log_in(page, s, who: str) -> None:
    page.goto(s.base + "/")
    page.fill("#token", who)
    page.click("#login-form button")
    page.wait_for_function("() => document.querySelector('#dashboard') && !document.querySelector('#dashboard').hidden",
                           timeout=30_000)


def test_a_report_is_made_off_the_event_loop_once_per_user_and_kept(site, hostile):
    s = site
    done: dict[str, httpx.Response] = {}

    def make() -> None:
        with s.client(s.bob) as http:
            done["report"] = http.get(f"/api/journals/{hostile}/report")

    maker = threading.Thread(target=make)
    waits = []
    with s.client(s.bob) as http, s.client(s.alice) as other:
        http.get(f"/api/journals/{s.journal}/state")
        maker.start()
        time.sleep(0.2)
        second = http.get(f"/api/journals/{s.journal}/report")  # bob's second report, while his first is made
        while maker.is_alive():
            started = time.monotonic()
            assert other.get("/api/status").status_code == 200
            waits.append(time.monotonic() - started)
            time.sleep(0.02)
        maker.join()
        started = time.monotonic()
        again = other.get(f"/api/journals/{hostile}/report")  # kept: served as it is
        kept_s = time.monotonic() - started
    assert done["report"].status_code == 200, done["report"].text
    assert second.status_code == 429 and "one at a time" in second.json()["error"]
    assert len(waits) >= 5 and max(waits) < 0.5, waits
    assert again.headers["x-report-seq"] == done["report"].headers["x-report-seq"] and kept_s < 1.0


def test_a_journals_script_never_runs_in_its_report(site, hostile, tmp_path):
    s = site
    with s.client(s.alice) as http:
        served = http.get(f"/api/journals/{hostile}/report")
    assert served.status_code == 200
    policy = served.headers["content-security-policy"]
    assert "sandbox allow-scripts" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert CURRENCY not in served.text and "&lt;img src=x onerror=" in served.text  # escaped where it is shown
    sent: list[str] = []
    with chromium_page(1280, 900) as (page, errors):
        page.on("request", lambda r: sent.append(f"{r.method} {r.url}"))
        log_in(page, s, s.alice)  # an operator's session: what the planted script would act with
        page.goto(f"{s.base}/api/journals/{hostile}/report")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length"
                               " >= 2 * Number(document.body.dataset.figures)", timeout=60_000)
        page.wait_for_timeout(1500)
        served_title, shown = page.title(), page.inner_text("body")
        (tmp_path / "hostile.html").write_text(served.text)  # the same report, opened as a file
        page.goto((tmp_path / "hostile.html").as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0", timeout=60_000)
        page.wait_for_timeout(1500)
        file_title = page.title()
    assert "pwned" not in served_title and "pwned" not in file_title
    assert not [r for r in sent if "/api/commands" in r], sent
    assert CURRENCY in shown  # the journal's text, shown as the text it is
    time.sleep(1)
    assert planted_halts(s) == []


def test_a_revoked_token_and_a_logout_close_their_open_streams(site):
    s = site
    dave = token(s.env, s.config, "dave", "read")
    bearer = {"authorization": f"Bearer {dave}"}
    events = ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/{s.journal}/stream?from_seq=1",
                               additional_headers=bearer, open_timeout=10, max_size=2**24)
    status = ws_client.connect(f"ws://127.0.0.1:{s.port}/api/status/stream", additional_headers=bearer, open_timeout=10)
    with events, status:
        assert json.loads(status.recv(timeout=30))["journal"] == s.journal
        cli(s.env, s.config, "web", "token", "revoke", "dave")
        revoked_at = time.monotonic()
        for conn in (events, status):
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    conn.recv(timeout=10)
            assert closed.value.rcvd.code == REVOKED and "revoked" in closed.value.rcvd.reason
        assert time.monotonic() - revoked_at < 5

    erin = token(s.env, s.config, "erin", "read")
    with s.client() as browser:
        session = browser.post("/api/login", json={"token": erin}).json()
        cookie = browser.cookies.get("foxhunt_session")
        with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/status/stream", origin=s.base,
                               additional_headers={"cookie": f"foxhunt_session={cookie}"}, open_timeout=10) as conn:
            conn.recv(timeout=30)
            logout = browser.post("/api/logout", headers={"origin": s.base, "x-csrf-token": session["csrf"]})
            assert logout.status_code == 200
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    conn.recv(timeout=10)
            assert closed.value.rcvd.code == REVOKED and "session has ended" in closed.value.rcvd.reason


def test_a_halt_through_the_gateway_is_answered_within_a_second(site):
    s = site
    took = []
    with s.client(s.alice) as http:
        for i in range(3):
            for command in ("halt", "resume"):
                started = time.monotonic()
                done = http.post("/api/commands", json={"command": command, "reason": f"gateway drill {i}"})
                took.append(time.monotonic() - started)
                assert done.status_code == 200, done.text
    assert max(took) < 1.0, took


def test_junk_tokens_do_not_lock_out_a_live_token_and_a_read_token_cannot_end_an_operators_session(site):
    s = site
    with s.client() as operator:
        operator.post("/api/login", json={"token": s.alice})
        for i in range(8):  # past login_attempts (3) from this address
            junk = httpx.get(f"{s.base}/api/journals", headers={"authorization": f"Bearer fht_junk{i}"})
            assert junk.status_code in (401, 429)
        with s.client(s.alice) as script:
            assert script.get("/api/journals").status_code == 200
        time.sleep(3.1)  # the junk's window passes, so that bob's logins below are his own
        with s.client() as reader:
            first = reader.post("/api/login", json={"token": s.bob}).cookies.get("foxhunt_session")
            for _ in range(40):  # a read token logging in again and again
                assert reader.post("/api/login", json={"token": s.bob}).status_code == 200
        assert operator.get("/api/session").status_code == 200  # alice's session is still there
        with s.client() as old:  # bob's oldest sessions made room for his newest, nobody else's
            old.cookies.set("foxhunt_session", first)
            assert old.get("/api/session").status_code == 401


def test_lagging_streams_share_a_capped_pool_of_connections(site, hostile):
    """Twenty streams far behind whose clients take nothing: the gateway reads for them a bounded chunk at a
    time, with one of at most CATCH_UP_READERS connections, and holds none while a page waits to be taken
    (each stream's own connection, held while it sent, made twenty)."""
    s = site
    headers = {"authorization": f"Bearer {s.bob}"}

    def readers() -> int:
        with psycopg.connect(s.dsn) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'foxhunt reader'"
                                ).fetchone()[0]

    with contextlib.ExitStack() as stack:
        slow = [stack.enter_context(ws_client.connect(
            f"ws://127.0.0.1:{s.port}/api/journals/{hostile}/stream?from_seq={1 + i}", additional_headers=headers,
            open_timeout=10, max_size=2**24)) for i in range(20)]
        time.sleep(1.0)  # their first chunks read, their sends blocked
        counts = []
        for _ in range(20):
            counts.append(readers())
            time.sleep(0.05)
        for conn in slow[:3]:  # each is still served when its client takes its pages
            assert json.loads(conn.recv(timeout=30))["events"]
    assert max(counts) <= CATCH_UP_READERS + 1, counts  # +1: a short query of the gateway's own


def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """An HTTP request written by hand (a lying Content-Length, a body in chunks); the status and the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return int(answer.split(b" ", 2)[1]), answer


def _length(answer: bytes) -> int:
    """The Content-Length an answer's head declares (0 when it declares none)."""
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_a_login_body_is_limited_before_it_is_read_and_must_be_json_from_this_site(site):
    s = site
    host = f"127.0.0.1:{s.port}"
    status, _ = raw_request(s.port, f"POST /api/login HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                                    "Content-Length: 268435456\r\n\r\n", b'{"token": "')
    assert status == 413  # answered before the 256 MiB it promises arrive
    chunk = b"x" * 65536
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    status, _ = raw_request(s.port, f"POST /api/login HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n", chunked)
    assert status == 413
    with s.client() as browser:
        # a form on another site can post text/plain without asking: a login CSRF with the attacker's token
        forged = browser.post("/api/login", content=json.dumps({"token": s.bob, "x": 1}).encode(),
                              headers={"content-type": "text/plain"})
        assert forged.status_code == 415 and "application/json" in forged.json()["error"]
        assert browser.cookies.get("foxhunt_session") is None
        elsewhere = browser.post("/api/login", json={"token": s.bob}, headers={"origin": "https://evil.example"})
        assert elsewhere.status_code == 403 and browser.cookies.get("foxhunt_session") is None
        assert browser.post("/api/login", json={"token": s.bob}, headers={"origin": s.base}).status_code == 200


def test_another_sites_name_for_this_address_is_refused(site):
    """DNS rebinding: a page of evil.example, whose name its owner has pointed at 127.0.0.1, is same-origin with
    itself (its Origin matches its Host), so only the Host header gives it away."""
    s = site
    status, answer = raw_request(s.port, f"GET /api/journals HTTP/1.1\r\nHost: evil.example:{s.port}\r\n"
                                         f"Authorization: Bearer {s.bob}\r\n\r\n")
    assert status == 400 and b"not one this gateway serves" in answer
    with pytest.raises(InvalidStatus) as refused:
        with ws_client.connect(f"ws://evil.example:{s.port}/api/status/stream", open_timeout=10,
                               sock=socket.create_connection(("127.0.0.1", s.port)),
                               additional_headers={"authorization": f"Bearer {s.bob}"}):
            pass
    assert refused.value.response.status_code == 403  # a WebSocket closed before it is accepted
    for host in (f"127.0.0.1:{s.port}", f"localhost:{s.port}"):  # the names of this address are served
        assert raw_request(s.port, f"GET /api/journals HTTP/1.1\r\nHost: {host}\r\n"
                                   f"Authorization: Bearer {s.bob}\r\n\r\n")[0] == 200


QUERIED = [e for e in ENDPOINTS if e.method == "GET" and e.query]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(QUERIED), st.data())
def test_any_query_parameter_is_answered_or_refused_by_name(site, endpoint, data):
    s = site
    param = data.draw(st.sampled_from(endpoint.query))
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=24)  # what a URL can carry
    value = data.draw(st.one_of(text, st.sampled_from(["²", "٣", "1e3", "-1", " 5", "0x10", "99999999999999999999"])))
    with s.client(s.bob) as http:
        got = http.get(endpoint.path.replace("{name}", s.journal), params={param.name: value})
    named = param.kind is str  # a journal's name: another journal, perhaps none (404)
    assert got.status_code in ((200, 400, 404) if named else (200, 400)), (
        endpoint.path, param.name, value, got.status_code, got.text[:200])
    assert got.headers["content-type"].startswith("application/json")
    if got.status_code == 400:
        assert param.name in got.json()["error"]


def test_unicode_digits_close_a_stream_by_name(site):
    s = site
    with s.client(s.bob) as http:
        got = http.get(f"/api/journals/{s.journal}/events", params={"limit": "²"})
        assert got.status_code == 400 and "limit" in got.json()["error"]
    with ws_client.connect(f"ws://127.0.0.1:{s.port}/api/journals/{s.journal}/stream?from_seq=%C2%B2",
                           additional_headers={"authorization": f"Bearer {s.bob}"}, open_timeout=10) as conn:
        with pytest.raises(ConnectionClosed) as closed:
            conn.recv(timeout=30)
        assert closed.value.rcvd.code == 1008 and "from_seq" in closed.value.rcvd.reason


def test_the_gateway_says_where_it_listens(site):
    assert f"foxhunt web: listening on http://127.0.0.1:{site.port}/" in site.log("web")


def test_a_dashboard_hides_controls_from_a_reader_and_shows_untracked_exposure_as_such(site):
    s = site
    with s.client(s.bob) as http:
        assert http.get(f"/api/journals/{s.journal}/risk").json()["usage"]["gross_exposure"] is None
    with chromium_page(1400, 1000) as (page, errors):
        log_in(page, s, s.bob)
        page.wait_for_function("() => document.querySelector('#risk').textContent.includes('gross exposure')",
                               timeout=30_000)
        assert not page.is_visible("#controls") and not page.is_visible("#controls button[data-command=halt]")
        risk = page.inner_text("#risk")
        assert "gross exposure: not tracked" in risk and "gross exposure: 0" not in risk
        # the tape shows prices and quantities as the decimals they stand for, not as integers of 10^-9
        page.wait_for_function("() => document.querySelector('#tape').textContent.includes('\"last_price\":\"')",
                               timeout=60_000)
        line = next(li for li in page.inner_text("#tape").splitlines() if '"last_price":"' in li)
        price = json.loads(line.split(" ", 2)[2])["last_price"]
        assert 0.5 < float(price) < 2 and len(price.split(".")[-1]) <= 9, line


def test_a_dashboard_shows_staleness_and_asks_again_after_a_restart_or_a_revocation(site):
    s = site
    frank = token(s.env, s.config, "frank", "read")
    with chromium_page(1400, 1000) as (page, errors):
        log_in(page, s, frank)
        page.wait_for_function("() => window.foxhunt.heardAt > 0", timeout=30_000)
        assert not page.is_visible("#stale")
        s.web.send_signal(signal.SIGTERM)  # the gateway goes away
        s.web.wait(timeout=30)
        page.wait_for_function("() => !document.querySelector('#stale').hidden", timeout=15_000)
        assert "stale" in page.inner_text("#stale") or "not connected" in page.inner_text("#stale")
        s.web = s.start("web-2", "web", "serve")  # back, with no memory of the session
        page.wait_for_function("() => !document.querySelector('#login').hidden", timeout=30_000)
        assert "log in again" in page.inner_text("#login-why")
        log_in(page, s, frank)
        page.wait_for_function("() => window.foxhunt.heardAt > 0 && document.querySelector('#stale').hidden",
                               timeout=30_000)
        cli(s.env, s.config, "web", "token", "revoke", "frank")
        page.wait_for_function("() => !document.querySelector('#login').hidden", timeout=15_000)
        assert "revoked" in page.inner_text("#login-why")
