"""The daemon's end of the admin socket: who may connect, frames in and out, nothing that can stall it.

The socket is created under a restrictive umask (so it is never reachable with wider permissions, not
even for an instant), then given mode 0600, or 0660 and a group. Every connection's peer credentials
(SO_PEERCRED: the uid, gid and pid the kernel vouches for) are checked against the allowed users and
groups; a refusal is answered, logged and the connection closed. With no users or groups configured,
only the daemon's own user is allowed.

Each connection is its own task, so a client that sends nothing, or half a frame, holds only itself:
a started frame must complete within `frame_timeout`, an idle connection is closed after
`idle_timeout`, and at most `max_connections` are served at once; at the limit, a new connection closes
the one that has waited longest for its next request (a silent client, a forgotten REPL: the REPL
connects again by itself), so an operator is always served. Garbage, oversized frames, unknown commands
and wrong arguments get an error reply; a frame that breaks the protocol also ends the connection, since
nothing after it can be trusted to be in step.

The server runs on the daemon's event loop, whose consuming loop yields to it at least every 256 inputs
taken in a row (runtime/daemon.py); a command reaches the loop through its urgent lane, ahead of queued
market data. A thread of its own, taking the GIL from the trading loop for each step, was measured
(bench/admin_latency.py): its slowest answers came later, not sooner.
"""

from __future__ import annotations

import contextlib
import grp
import math
import os
import pwd
import socket
import stat
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream

from foxhunt.admin import protocol
from foxhunt.admin.protocol import Parsed, ProtocolError, Reply, UsageError
from foxhunt.errors import ConfigError

log = structlog.get_logger("foxhunt.admin")

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid (socket(7))


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int
    user: str


def user_ids(users: list[str], key: str) -> frozenset[int]:
    """The uids of Unix users named in the configuration at `key`; ConfigError names one that does not exist."""
    try:
        return frozenset(pwd.getpwnam(name).pw_uid for name in users)
    except KeyError as e:
        raise ConfigError(f"{key}: no such user {e.args[0].split(':')[-1].strip()}") from None


@dataclass(frozen=True)
class Access:
    """Who may connect, resolved to numbers once at start-up."""

    uids: frozenset[int]
    gids: frozenset[int]

    @classmethod
    def resolve(cls, users: list[str], groups: list[str]) -> Access:
        uids = user_ids(users, "admin.allowed_users")
        try:
            gids = frozenset(grp.getgrnam(name).gr_gid for name in groups)
        except KeyError as e:
            raise ConfigError(f"admin.allowed_groups: no such group {e.args[0].split(':')[-1].strip()}") from None
        if not uids and not gids:
            uids = frozenset({os.geteuid()})
        return cls(uids, gids)

    def allows(self, peer: Peer) -> bool:
        if peer.uid in self.uids:
            return True
        if not self.gids:
            return False
        groups = {peer.gid}
        with contextlib.suppress(KeyError):
            groups.update(os.getgrouplist(peer.user, peer.gid))
        return not self.gids.isdisjoint(groups)


@dataclass(frozen=True)
class ServerPolicy:
    path: Path
    group: str = ""  # "" for mode 0600; a group name for mode 0660 owned by that group
    access: Access = field(default_factory=lambda: Access.resolve([], []))  # the daemon's own user
    max_connections: int = 8
    idle_timeout: float = 3600.0
    frame_timeout: float = 5.0
    gateways: frozenset[int] = frozenset()  # uids that may name the operator they act for (Request.operator)


Handler = Callable[[Parsed, Peer], Awaitable[Any]]


def bind(policy: ServerPolicy) -> socket.socket:
    """Create and bind the listening socket with its final permissions before anyone can connect."""
    path = policy.path
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ConfigError(f"admin.socket: {path} exists and is not a socket")
        if _listening(path):
            raise ConfigError(f"admin.socket: {path} is in use by another running daemon; give this one its own")
        path.unlink()  # a stale socket of an earlier run that ended without removing it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as e:
        sock.close()
        raise ConfigError(f"admin.socket: cannot bind {path}: {e.strerror}") from e
    finally:
        os.umask(old)
    if policy.group:
        try:
            gid = grp.getgrnam(policy.group).gr_gid
        except KeyError:
            sock.close()
            raise ConfigError(f"admin.group: no such group {policy.group!r}") from None
        os.chown(path, -1, gid)
        os.chmod(path, 0o660)
    sock.listen(policy.max_connections)
    sock.setblocking(False)
    return sock


async def serve(
    policy: ServerPolicy, handler: Handler, *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED
) -> None:
    sock = bind(policy)
    listener = await anyio.abc.SocketListener.from_socket(sock)
    idle: dict[anyio.CancelScope, float] = {}  # every connection served, with when it began to wait (inf: busy)
    log.info("admin_listening", socket=str(policy.path), group=policy.group or None)
    try:
        async with listener:
            task_status.started()
            await listener.serve(lambda stream: _connection(stream, policy, handler, idle))
    finally:
        with contextlib.suppress(FileNotFoundError):
            policy.path.unlink()


async def _connection(
    stream: anyio.abc.SocketStream, policy: ServerPolicy, handler: Handler, idle: dict[anyio.CancelScope, float]
) -> None:
    async with stream:
        peer = _peer(stream)
        if not policy.access.allows(peer):
            log.warning("admin_refused", uid=peer.uid, user=peer.user, pid=peer.pid, why="not an allowed user or group")
            await _send(stream, Reply(ok=False, error=f"permission denied for user {peer.user} (uid {peer.uid})"))
            return
        if len(idle) >= policy.max_connections:
            longest = min(idle, key=idle.__getitem__)
            if idle[longest] == math.inf:  # every connection is in the middle of a request
                log.warning("admin_refused", uid=peer.uid, user=peer.user, pid=peer.pid, why="too many connections")
                await _send(stream, Reply(ok=False, error=f"too many admin connections (limit"
                                                           f" {policy.max_connections})"))
                return
            log.info("admin_connection_evicted", why="the connection limit, for a new one", idle_s=round(
                time.monotonic() - idle.pop(longest), 1))
            longest.cancel()
        with anyio.CancelScope() as scope:
            idle[scope] = time.monotonic()
            try:
                await _serve_peer(stream, peer, policy, handler, lambda waiting: idle.__setitem__(
                    scope, time.monotonic() if waiting else math.inf))
            finally:
                idle.pop(scope, None)


async def _serve_peer(stream: anyio.abc.SocketStream, peer: Peer, policy: ServerPolicy, handler: Handler,
                      waiting: Callable[[bool], None]) -> None:
    reader = BufferedByteReceiveStream(stream)
    while True:
        try:
            with anyio.fail_after(policy.idle_timeout):
                header = await reader.receive_exactly(protocol.HEADER.size)
            waiting(False)
            with anyio.fail_after(policy.frame_timeout):
                body = await reader.receive_exactly(protocol.frame_length(header))
            request = protocol.decode_request(body)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
            return
        except TimeoutError:
            log.info("admin_connection_timed_out", uid=peer.uid, user=peer.user)
            return
        except ProtocolError as e:
            log.warning("admin_bad_frame", uid=peer.uid, user=peer.user, error=str(e))
            await _send(stream, Reply(ok=False, error=str(e)))
            return
        await _send(stream, await _answer(request, peer, policy, handler))
        waiting(True)


async def _answer(request: protocol.Request, peer: Peer, policy: ServerPolicy, handler: Handler) -> Reply:
    argv = request.argv
    try:
        if request.operator:
            if peer.uid not in policy.gateways:
                log.warning("admin_refused", uid=peer.uid, user=peer.user, pid=peer.pid,
                            why="named an operator without being a gateway", operator=request.operator[:80])
                return Reply(ok=False, error=f"user {peer.user} (uid {peer.uid}) may not act for another operator:"
                                             " only the users in admin.gateway_users may")
            peer = Peer(peer.pid, peer.uid, peer.gid, protocol.check_operator(request.operator))
        parsed = protocol.parse(argv)
        if parsed.command == "help":
            return Reply(ok=True, result=protocol.help_text(parsed.args[0] if parsed.args else None))
        if protocol.COMMANDS[parsed.command].changes_state:
            log.info("admin_command", uid=peer.uid, user=peer.user, argv=argv)
        return Reply(ok=True, result=await handler(parsed, peer))
    except UsageError as e:
        return Reply(ok=False, error=str(e))
    except Exception as e:
        log.exception("admin_query_failed", uid=peer.uid, user=peer.user, argv=argv)
        return Reply(ok=False, error=f"internal error answering {argv[0]!r}: {type(e).__name__}: {e}")


async def _send(stream: anyio.abc.SocketStream, reply: Reply) -> None:
    try:
        data = protocol.frame(reply)
    except ProtocolError as e:
        data = protocol.frame(Reply(ok=False, error=f"answer too large to send: {e}; narrow the query"))
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
        await stream.send(data)


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _peer(stream: anyio.abc.SocketStream) -> Peer:
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    pid, uid, gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return Peer(pid, uid, gid, user)
