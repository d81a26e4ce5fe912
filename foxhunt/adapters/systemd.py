"""The sd_notify protocol, spoken directly: one datagram of `KEY=VALUE` lines to `$NOTIFY_SOCKET`.

The protocol (sd_notify(3)): the socket is an AF_UNIX datagram socket named by `NOTIFY_SOCKET`, a path, or
an abstract name when it starts with `@`. `READY=1` ends start-up for `Type=notify`, `STATUS=` is shown by
`systemctl status`, `WATCHDOG=1` must arrive within `WATCHDOG_USEC` microseconds or systemd kills and
restarts the unit (`WatchdogSec=`), `STOPPING=1` announces shutdown. `WATCHDOG_PID`, when set, names the
process the watchdog applies to. Without `NOTIFY_SOCKET` (not under systemd) every call does nothing.

A lost datagram is not worth crashing a trading daemon for, so send errors are logged, not raised; the
watchdog then does its job if the process really is stuck. Nor is it worth stopping one for: the socket
does not block. A datagram socket's receiver holds only a few datagrams unread (net.unix.max_dgram_qlen,
10 by default); a blocking send to a receiver that does not read (a busy or hung manager) would stop the
trading loop, the operator's answers and all, until it did. Such a datagram is dropped and logged.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import structlog

log = structlog.get_logger("foxhunt.systemd")

STATUS_EVERY = 5.0  # seconds between STATUS= updates when no watchdog asks for more often


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        path = env.get("NOTIFY_SOCKET", "")
        self.address = "\0" + path[1:] if path.startswith("@") else path
        self.watchdog_interval = _watchdog_interval(env)
        self.beat_interval = min(STATUS_EVERY, self.watchdog_interval / 2 if self.watchdog_interval else STATUS_EVERY)
        self._sock: socket.socket | None = None
        self._next_beat = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def close(self) -> None:
        """Close the socket the datagrams go out on (the next notify opens it again)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def notify(self, **fields: str) -> None:
        """Send one datagram, e.g. notify(READY="1", STATUS="trading")."""
        if not self.address:
            return
        payload = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        try:
            if self._sock is None:
                kind = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
                self._sock = socket.socket(socket.AF_UNIX, kind)
            self._sock.sendto(payload, self.address)
        except BlockingIOError:
            log.warning("sd_notify_dropped", socket=self.address.replace("\0", "@"), fields=sorted(fields),
                        why="the receiver's queue is full: the service manager is not reading")
        except OSError as e:
            log.warning("sd_notify_failed", socket=self.address.replace("\0", "@"), error=str(e), fields=sorted(fields))

    def ready(self, status: str) -> None:
        self.notify(READY="1", STATUS=status)

    def status(self, status: str) -> None:
        self.notify(STATUS=status)

    def stopping(self, status: str) -> None:
        self.notify(STOPPING="1", STATUS=status)

    def heartbeat_due(self, now: float | None = None) -> bool:
        """Whether the next heartbeat is due: every half watchdog interval (as sd_watchdog_enabled(3)
        advises), and at least every STATUS_EVERY seconds so `systemctl status` stays current."""
        return self.enabled and (time.monotonic() if now is None else now) >= self._next_beat

    def heartbeat(self, status: str) -> None:
        """STATUS= and, with a watchdog, WATCHDOG=1: call it from the loop whose progress it vouches for."""
        if not self.enabled:
            return
        self._next_beat = time.monotonic() + self.beat_interval
        if self.watchdog_interval is not None:
            self.notify(WATCHDOG="1", STATUS=status)
        else:
            self.notify(STATUS=status)

    def seconds_to_heartbeat(self) -> float:
        if not self.enabled:
            return float("inf")
        return max(0.0, self._next_beat - time.monotonic())


def _watchdog_interval(env: Mapping[str, str]) -> float | None:
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None  # the watchdog is meant for another process (a parent that exec'd us did not reset it)
    return int(usec) / 1e6
