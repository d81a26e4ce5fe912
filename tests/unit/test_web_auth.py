"""The web gateway's pure parts: tokens, sessions, the login limit, origins, and the OpenAPI document."""

from __future__ import annotations

import re

import pytest

from foxhunt.web import auth
from foxhunt.web.auth import LoginLimiter, Principal, Sessions, SessionsFull


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_tokens_are_long_random_and_stored_as_their_sha256():
    a, b = auth.new_token(), auth.new_token()
    assert a != b and a.startswith("fht_") and len(a) >= 40
    assert auth.digest(a) == auth.digest(a) != auth.digest(b) and len(auth.digest(a)) == 32


def test_scopes_and_the_operator_name():
    reader, operator = Principal(1, "bob", "read"), Principal(2, "alice", "operate")
    assert reader.may("read") and not reader.may("operate")
    assert operator.may("read") and operator.may("operate")
    assert operator.operator == "web:alice"


def test_sessions_expire_close_and_end_with_their_token():
    clock = Clock()
    sessions = Sessions(ttl_s=60, clock=clock)
    alice, bob = sessions.open(Principal(1, "alice", "operate")), sessions.open(Principal(2, "bob", "read"))
    assert sessions.get(alice.id) is alice and alice.csrf != bob.csrf and alice.id != bob.id
    assert sessions.get(None) is None and sessions.get("forged") is None
    assert alice.csrf_ok(alice.csrf) and not alice.csrf_ok(bob.csrf) and not alice.csrf_ok(None)
    sessions.close_token(1)
    assert sessions.get(alice.id) is None and sessions.get(bob.id) is bob
    clock.now += 60
    assert sessions.get(bob.id) is None


def test_the_session_table_is_bounded_oldest_first():
    clock = Clock()
    sessions = Sessions(ttl_s=60, clock=clock, limit=3)
    opened = []
    for i in range(5):
        clock.now += 1
        opened.append(sessions.open(Principal(i, f"u{i}", "read")))
    assert [s.id for s in opened[2:]] == list(sessions.by_id)


def test_a_token_holds_a_bounded_number_of_sessions_its_next_login_ends_its_own_oldest():
    clock = Clock()
    sessions = Sessions(ttl_s=60, clock=clock, per_token=3)
    alice = sessions.open(Principal(1, "alice", "operate"))
    bobs = [sessions.open(Principal(2, "bob", "read")) for _ in range(10)]
    assert sessions.get(alice.id) is alice
    assert [sessions.get(b.id) for b in bobs] == [None] * 7 + bobs[7:]


def test_a_full_table_never_ends_a_higher_scopes_session():
    clock = Clock()
    sessions = Sessions(ttl_s=60, clock=clock, limit=3)
    operators = [sessions.open(Principal(i, f"op{i}", "operate")) for i in range(2)]
    reader = sessions.open(Principal(9, "bob", "read"))
    newer_reader = sessions.open(Principal(8, "carol", "read"))  # ends the oldest read session, bob's
    assert sessions.get(reader.id) is None and sessions.get(newer_reader.id) is newer_reader
    assert all(sessions.get(o.id) is o for o in operators)
    sessions.open(Principal(3, "op3", "operate"))  # an operator's login may end a reader's
    assert sessions.get(newer_reader.id) is None
    with pytest.raises(SessionsFull):  # all operators now: a reader is refused, nobody is logged out
        sessions.open(Principal(7, "dave", "read"))
    clock.now += 60  # expired sessions make room first
    assert sessions.open(Principal(7, "dave", "read"))


def test_the_login_limit_counts_failures_per_client_in_a_window():
    clock = Clock()
    limiter = LoginLimiter(attempts=3, window_s=60, clock=clock)
    for _ in range(3):
        assert limiter.retry_after("10.0.0.1") == 0
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == pytest.approx(60)
    assert limiter.retry_after("10.0.0.2") == 0  # another client is not held back
    clock.now += 30
    assert limiter.retry_after("10.0.0.1") == pytest.approx(30)
    clock.now += 30
    assert limiter.retry_after("10.0.0.1") == 0  # the failures aged out
    limiter.failed("10.0.0.1")
    limiter.succeeded("10.0.0.1")
    assert limiter.failures.get("10.0.0.1") is None


@pytest.mark.parametrize("origin, host, same", [
    ("http://127.0.0.1:8787", "127.0.0.1:8787", True),
    ("https://desk.example.com", "desk.example.com", True),
    ("https://evil.example", "desk.example.com", False),
    ("http://127.0.0.1:9999", "127.0.0.1:8787", False),
    ("null", "127.0.0.1:8787", False),
    (None, "127.0.0.1:8787", False),
])
def test_same_origin(origin, host, same):
    assert auth.same_origin(origin, host) is same


def test_the_openapi_document_covers_every_route_and_its_references_resolve():
    from foxhunt.web.app import ENDPOINTS, OPENAPI

    assert {(e.path, e.method.lower()) for e in ENDPOINTS} == {
        (path, method) for path, ops in OPENAPI["paths"].items() for method in ops}
    text = repr(OPENAPI)
    for ref in set(re.findall(r"#/components/schemas/(\w+)", text)):
        assert ref in OPENAPI["components"]["schemas"], ref
    commands = OPENAPI["paths"]["/api/commands"]["post"]
    assert commands["security"] and "CSRF" in commands["description"]
    assert OPENAPI["paths"]["/api/login"]["post"]["security"] == [] and "429" in OPENAPI["paths"]["/api/login"]["post"]["responses"]


def test_the_hosts_served_default_to_the_loopback_names_of_the_listen_port():
    from foxhunt.config import WebConfig

    assert WebConfig(listen="127.0.0.1:8787").hosts() == {"127.0.0.1:8787", "localhost:8787", "[::1]:8787"}
    assert WebConfig(listen="0.0.0.0:8787").hosts() is None  # behind a proxy, or named in allowed_hosts
    assert WebConfig(listen="127.0.0.1:8787", allowed_hosts=["Desk.Example.com"]).hosts() == {"desk.example.com"}
