"""The admin socket server against real Unix sockets: permissions, peer credentials, and clients that
send garbage, oversized frames or nothing at all, none of which may crash or stall it."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import socket
import stat

import anyio
import pytest

from foxhunt.admin import protocol
from foxhunt.admin.protocol import Request
from foxhunt.admin.server import Access, ServerPolicy, bind, serve
from foxhunt.errors import ConfigError


class Recorder:
    """A handler that answers queries with the peer's name and records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], str, str]] = []

    async def __call__(self, parsed, peer):
        self.calls.append((parsed.command, parsed.args, parsed.reason, peer.user))
        if parsed.command == "pnl":
            raise RuntimeError("a bug in a query")
        return {"user": peer.user, "uid": peer.uid}


def me() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def another_user() -> str:
    """An existing user that is not us: peer credentials are what is checked, not the file mode."""
    return next(p.pw_name for p in pwd.getpwall() if p.pw_uid != os.geteuid())


async def ask(path, payload: bytes) -> protocol.Reply:
    async with await anyio.connect_unix(path) as s:
        await s.send(payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + protocol.frame_length(data[:4]):
            chunk = await s.receive()
            data += chunk
        return protocol.decode_reply(data[4:])


async def request(path, *argv: str) -> protocol.Reply:
    return await ask(path, protocol.frame(Request(argv=list(argv))))


@contextlib.asynccontextmanager
async def running(tmp_path, gateways: frozenset[int] = frozenset()):
    """A server in a task group of the test's own task (an async fixture would run it in another)."""
    handler = Recorder()
    policy = ServerPolicy(path=tmp_path / "a.sock", access=Access.resolve([], []), max_connections=3,
                          idle_timeout=30, frame_timeout=0.5, gateways=gateways)
    async with anyio.create_task_group() as tg:
        await tg.start(serve, policy, handler)
        yield policy, handler
        tg.cancel_scope.cancel()


async def test_socket_is_private_and_answers_its_owner(tmp_path):
    async with running(tmp_path) as (policy, handler):
        assert stat.S_IMODE(policy.path.stat().st_mode) == 0o600
        reply = await request(policy.path, "halt", "--reason", "test")
        assert reply.ok and reply.result == {"user": me(), "uid": os.geteuid()}
        assert handler.calls == [("halt", [], "test", me())]


async def test_only_a_gateway_user_may_name_the_operator_it_acts_for(tmp_path):
    halt = ["halt", "--reason", "from the browser"]
    async with running(tmp_path) as (policy, handler):  # we are allowed to connect, but no gateway
        reply = await ask(policy.path, protocol.frame(Request(argv=halt, operator="web:alice")))
        assert not reply.ok and "may not act for another operator" in reply.error and "admin.gateway_users" in reply.error
        assert handler.calls == []
    async with running(tmp_path, gateways=frozenset({os.geteuid()})) as (policy, handler):
        reply = await ask(policy.path, protocol.frame(Request(argv=halt, operator="web:alice")))
        assert reply.ok and reply.result == {"user": "web:alice", "uid": os.geteuid()}
        for bad in ("web alice", "-x", "a" * 65, "web:al\nice"):
            reply = await ask(policy.path, protocol.frame(Request(argv=halt, operator=bad)))
            assert not reply.ok and "is not allowed" in reply.error
        assert (await request(policy.path, *halt)).result["user"] == me()  # without a name: the gateway's own
        assert [call[3] for call in handler.calls] == ["web:alice", me()]


def test_unknown_gateway_users_are_a_config_error():
    from foxhunt.admin.server import user_ids

    with pytest.raises(ConfigError, match="admin.gateway_users: no such user"):
        user_ids(["no-such-user-here"], "admin.gateway_users")


async def test_usage_errors_and_failing_queries_are_answered_and_the_server_carries_on(tmp_path):
    async with running(tmp_path) as (policy, _):
        assert (await request(policy.path, "dance")).error == "unknown command 'dance'; try 'help'"
        failed = await request(policy.path, "pnl")
        assert not failed.ok and "RuntimeError: a bug in a query" in failed.error
        assert "status" in (await request(policy.path, "help")).result
        assert (await request(policy.path, "status")).ok


@pytest.mark.parametrize(
    "payload, error",
    [
        (b"\xff\xff\xff\xff", "limit is 65536"),
        (b"\x00\x00\x00\x05hello", "bad request"),
        (b"\x00\x00\x00\x0b{\"argv\": 1}", "bad request"),
    ],
)
async def test_garbage_and_oversized_frames_get_an_error(tmp_path, payload, error):
    async with running(tmp_path) as (policy, handler):
        reply = await ask(policy.path, payload)
        assert not reply.ok and error in reply.error
        assert (await request(policy.path, "status")).ok  # and the server is still there


async def test_silent_and_half_frame_clients_stall_nobody(tmp_path):
    async with running(tmp_path) as (policy, handler):
        async with await anyio.connect_unix(policy.path), await anyio.connect_unix(policy.path) as half:
            await half.send(b"\x00\x00\x01\x00{")  # promises 256 bytes, sends one
            with anyio.fail_after(2):
                assert (await request(policy.path, "status")).ok  # served while both hang
            with anyio.fail_after(2), pytest.raises(anyio.EndOfStream):
                await half.receive()  # the half frame is cut off after frame_timeout


async def test_at_the_limit_a_new_connection_closes_the_longest_idle_one(tmp_path):
    """Silent clients (or forgotten REPLs) filling every slot lock no operator out: the one that has waited
    longest for its next request is closed for the newcomer."""
    async with running(tmp_path) as (policy, handler):
        async with await anyio.connect_unix(policy.path) as oldest, await anyio.connect_unix(policy.path), \
                await anyio.connect_unix(policy.path):
            await anyio.sleep(0.05)
            with anyio.fail_after(2):
                assert (await request(policy.path, "status")).ok
            with anyio.fail_after(2), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                await oldest.receive()


async def test_connections_beyond_the_limit_all_in_a_request_are_refused_with_a_reason(tmp_path):
    async with running(tmp_path) as (policy, handler):
        async with await anyio.connect_unix(policy.path) as a, await anyio.connect_unix(policy.path) as b, \
                await anyio.connect_unix(policy.path) as c:
            for half in (a, b, c):
                await half.send(b"\x00\x00\x01\x00{")  # in the middle of a frame: busy, not idle
            await anyio.sleep(0.05)
            reply = await request(policy.path, "status")
            assert not reply.ok and "too many admin connections (limit 3)" in reply.error
        await anyio.sleep(0.05)
        assert (await request(policy.path, "status")).ok


async def test_a_user_who_is_not_allowed_is_refused_by_peer_credentials(tmp_path):
    handler = Recorder()
    policy = ServerPolicy(path=tmp_path / "b.sock", access=Access.resolve([another_user()], []))
    async with anyio.create_task_group() as tg:
        await tg.start(serve, policy, handler)
        reply = await request(policy.path, "kill", "--reason", "intruder")
        tg.cancel_scope.cancel()
    assert not reply.ok and reply.error == f"permission denied for user {me()} (uid {os.geteuid()})"
    assert handler.calls == []


def test_the_client_reads_a_refusal_sent_before_the_daemon_read_its_request(tmp_path):
    """A refused peer is answered and closed at once; a client whose request goes out after that close gets
    a broken pipe, and must still show the daemon's answer, not the pipe (admin/client.py, Connection.ask)."""
    import threading
    import time

    from foxhunt.admin.client import Connection

    path = tmp_path / "r.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def refuse() -> None:
        peer, _ = listener.accept()
        with peer:
            peer.sendall(protocol.frame(protocol.Reply(ok=False, error="permission denied for user nobody")))

    refuser = threading.Thread(target=refuse)
    refuser.start()
    conn = Connection(path, timeout=5)
    refuser.join()
    time.sleep(0.05)  # the daemon's side is closed before the request is sent
    try:
        reply = conn.ask(["kill", "--reason", "let me in"])
    finally:
        conn.close()
        listener.close()
    assert not reply.ok and reply.error == "permission denied for user nobody"


async def test_group_mode_and_allowed_groups(tmp_path):
    group = grp.getgrgid(os.getegid()).gr_name
    policy = ServerPolicy(path=tmp_path / "c.sock", group=group, access=Access.resolve([another_user()], [group]))
    async with anyio.create_task_group() as tg:
        await tg.start(serve, policy, Recorder())
        assert stat.S_IMODE(policy.path.stat().st_mode) == 0o660
        assert policy.path.stat().st_gid == os.getegid()
        assert (await request(policy.path, "status")).ok  # allowed through our group
        tg.cancel_scope.cancel()
    assert not policy.path.exists()  # removed on the way out


def test_unknown_users_groups_and_a_live_socket_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="admin.allowed_users: no such user"):
        Access.resolve(["no-such-user-here"], [])
    with pytest.raises(ConfigError, match="admin.allowed_groups: no such group"):
        Access.resolve([], ["no-such-group-here"])
    path = tmp_path / "live.sock"
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(path))
    live.listen(1)
    try:
        with pytest.raises(ConfigError, match="in use by another running daemon"):
            bind(ServerPolicy(path=path))
    finally:
        live.close()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        bind(ServerPolicy(path=tmp_path / "file"))
