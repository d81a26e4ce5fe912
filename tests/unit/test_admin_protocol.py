"""The admin protocol: command validation, frames, completion, and the sd_notify datagrams."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from foxhunt import config
from foxhunt.adapters.systemd import Notifier
from foxhunt.admin import protocol
from foxhunt.admin.client import complete, render
from foxhunt.admin.protocol import COMMANDS, ProtocolError, Reply, Request, UsageError, parse


def test_a_state_change_is_parsed_with_its_arguments_and_reason():
    p = parse(["limit", "set", "collar_bps", "300", "--reason", "wide spreads"])
    assert (p.command, p.args, p.reason) == ("limit", ["set", "collar_bps", "300"], "wide spreads")
    assert parse(["orders", "--open"]).flags == {"--open"}
    assert parse(["journal", "tail", "-n", "5"]).options == {"-n": "5"}


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "empty command"),
        (["dance"], "unknown command 'dance'"),
        (["halt"], "needs --reason TEXT"),
        (["halt", "--reason", "  "], "needs --reason TEXT"),
        (["halt", "now", "-r", "x"], "wrong number of arguments; usage: halt --reason TEXT"),
        (["limit", "get", "a", "b", "-r", "x"], "'get' is not one of set"),
        (["limit", "set", "a", "-r", "x"], "wrong number of arguments"),
        (["strategy", "stop", "ema_cross", "-r", "x"], "not one of pause, resume"),
        (["cancel", "-r", "x"], "wrong number of arguments"),
        (["orders", "--all"], "unknown option '--all'"),
        (["journal", "tail", "-n"], "-n needs a value"),
        (["status", "--reason", "x"], "only for commands that change state"),
    ],
)
def test_bad_commands_get_an_error_naming_what_is_wrong(argv, message):
    with pytest.raises(UsageError, match=message):
        parse(argv)


def test_help_covers_every_command():
    text = protocol.help_text()
    assert all(spec.usage in text for spec in COMMANDS.values())
    assert "journaled with your user name" in protocol.help_text("kill")
    with pytest.raises(UsageError):
        protocol.help_text("dance")


def test_frames_round_trip_and_oversized_or_garbage_ones_are_protocol_errors():
    data = protocol.frame(Request(argv=["status"]))
    assert protocol.frame_length(data[:4]) == len(data) - 4
    assert protocol.decode_request(data[4:]) == Request(argv=["status"])
    with pytest.raises(ProtocolError, match="limit is 65536"):
        protocol.frame_length(b"\xff\xff\xff\xff")
    for garbage in (b"\x00\x01\x02", b"[1,2]", b'{"argv": [1]}', b'{"argv": ["x"], "eval": "1"}', b"{"):
        with pytest.raises(ProtocolError, match="bad request"):
            protocol.decode_request(garbage)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        protocol.frame(Reply(ok=True, result="x" * protocol.MAX_FRAME))


def test_completion_offers_commands_sub_commands_and_options():
    assert complete("st", []) == ["status", "strategy"]
    assert complete("", ["strategy"]) == ["--reason", "pause", "resume"]
    assert complete("--o", ["orders"]) == ["--open"]
    assert complete("ki", ["help"]) == ["kill"]
    assert complete("", ["dance"]) == []


def test_records_render_as_a_table():
    text = render([{"symbol": "EURUSD", "quantity": "1000"}, {"symbol": "GBPUSD", "quantity": "-5"}])
    assert text.splitlines() == ["symbol  quantity", "EURUSD  1000", "GBPUSD  -5"]


def test_a_journals_control_characters_reach_the_terminal_as_escapes():
    """A symbol, a reason or an operator's name comes from whoever wrote the journal: no escape sequence
    (retitling the terminal, moving the cursor), no bidirectional override and no line break of theirs
    reaches the terminal as itself."""
    hostile = "EUR\x1b]0;owned\x07USD\u202eDSU\nfake: line"
    for text in (render([{"symbol": hostile, "qty": "1"}]), render({"reason": hostile}),
                 render({"orders": [{"symbol": hostile}]})):
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text and "fake: line" in text
        assert "\\x1b]0;owned\\x07" in text and "\\u202e" in text and "\n" + "fake" not in text
    assert render("a help text\nover two lines") == "a help text\nover two lines"  # its own line breaks stay


# --- sd_notify -----------------------------------------------------------------------------------


@pytest.fixture
def notify_socket(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify"
    sock.bind(str(path))
    sock.settimeout(2)
    yield path, sock
    sock.close()


def test_notifier_sends_ready_status_watchdog_and_stopping_datagrams(notify_socket):
    path, sock = notify_socket
    n = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "4000000"})
    assert n.watchdog_interval == 4.0 and n.beat_interval == 2.0
    n.ready("trading")
    assert sock.recv(4096) == b"READY=1\nSTATUS=trading"
    assert n.heartbeat_due()
    n.heartbeat("seq=7")
    assert sock.recv(4096) == b"WATCHDOG=1\nSTATUS=seq=7"
    assert not n.heartbeat_due() and 1.5 < n.seconds_to_heartbeat() <= 2.0
    n.stopping("bye")
    assert sock.recv(4096) == b"STOPPING=1\nSTATUS=bye"
    n.close()


def test_notifier_never_blocks_on_a_manager_that_does_not_read(notify_socket):
    """A datagram socket's receiver queues a few datagrams (net.unix.max_dgram_qlen); a blocking send past
    them waited for the manager to read, with the trading loop, and the operator's answers, stopped."""
    path, sock = notify_socket
    n = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "2000000"})
    done = threading.Event()

    def beat() -> None:
        for i in range(200):  # far more than the queue holds, none of them read
            n.heartbeat(f"seq={i}")
        done.set()

    threading.Thread(target=beat, daemon=True).start()
    assert done.wait(5), "a heartbeat blocked on a full queue"
    assert sock.recv(4096) == b"WATCHDOG=1\nSTATUS=seq=0"  # the first ones arrived; the rest were dropped
    n.close()


def test_notifier_reaches_an_abstract_socket_and_heartbeats_only_status_without_a_watchdog():
    name = f"foxhunt-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2)
    try:
        n = Notifier({"NOTIFY_SOCKET": "@" + name})
        n.heartbeat("ok")
        assert sock.recv(4096) == b"STATUS=ok"
        n.close()
    finally:
        sock.close()


def test_notifier_is_silent_outside_systemd_and_ignores_a_watchdog_meant_for_another_process():
    assert not Notifier({}).enabled and not Notifier({}).heartbeat_due()
    Notifier({}).ready("x")  # nothing to send to, nothing raised
    other = Notifier({"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert other.watchdog_interval is None
    other.ready("lost")  # a missing socket is logged, never raised
    other.close()


# --- configuration reload ------------------------------------------------------------------------


def test_config_changes_split_risk_limits_from_settings_that_need_a_restart():
    old = config.load(None, env={})
    new = config.load(None, env={"FOXHUNT_RISK__COLLAR_BPS": "300", "FOXHUNT_JOURNAL__BATCH_MAX": "500",
                                 "FOXHUNT_RISK__INSTRUMENTS__EURUSD__MAX_ORDER_QTY": "5000"})
    risk, restart = config.changes(old, new)
    assert risk == ["collar_bps", "instruments.EURUSD.max_order_qty"]
    assert restart == ["journal.batch_max"]
    assert config.changes(old, old) == ([], [])


# --- the systemd unit ----------------------------------------------------------------------------


def test_the_unit_file_passes_systemd_analyze_verify(tmp_path):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    analyze = shutil.which("systemd-analyze")
    unit = (Path(__file__).parents[2] / "scripts" / "foxhunt.service").read_text()
    for line in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "StateDirectory=foxhunt",
                 "RuntimeDirectory=foxhunt", "CacheDirectory=foxhunt", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "PrivateTmp=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"):
        assert line in unit, line
    web = (Path(__file__).parents[2] / "scripts" / "foxhunt-web.service").read_text()
    for line in ("Type=notify", "User=foxhunt-web", "SupplementaryGroups=foxhunt", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "MemoryDenyWriteExecute=yes", "CapabilityBoundingSet=\n"):
        assert line in web, line
    if analyze is None:  # the checks above still ran; verify needs systemd's own tool
        return
    # verify needs the ExecStart binary to exist: point it at this checkout's interpreter
    bin_dir = Path(sys.executable).parent
    names = ["foxhunt.service", "foxhunt-snapshot.service", "foxhunt-snapshot.timer", "foxhunt-web.service"]
    for name in names:
        text = (Path(__file__).parents[2] / "scripts" / name).read_text()
        (tmp_path / name).write_text(text.replace("/opt/foxhunt/venv/bin", str(bin_dir)))
    result = subprocess.run([analyze, "verify", *(str(tmp_path / n) for n in names)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and "foxhunt" not in result.stderr, result.stderr
