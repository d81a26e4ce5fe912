"""The daemon as systemd and an operator see it: a real `foxhunt run` subprocess with a real NOTIFY_SOCKET
and the embedded PostgreSQL, steered through its admin socket, reloaded with SIGHUP, stopped with
SIGTERM, killed with SIGKILL and restarted. Afterwards the journal must hold every operator command with
its operator, replay must reproduce the state the restart rebuilt, and a user who is not allowed must
have been refused."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.admin.client import Connection
from foxhunt.messages import codec
from tests.integration.test_crash import recovered
from tests.stored import agent_files, files

pytestmark = pytest.mark.postgres

CONFIG = """
[run]
on_stop = "cancel"
[admin]
socket = "{socket}"
group = "{group}"
allowed_users = ["{me}"]
[risk]
collar_bps = {collar}
"""

# What a user who is not allowed runs: plain Python, no foxhunt import (that user cannot read our venv).
INTRUDER = """
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = b'{"argv": ["kill", "--reason", "let me in"]}'
try:
    s.sendall(struct.pack(">I", len(body)) + body)
except BrokenPipeError:
    pass  # refused and closed before the daemon read it, as the admin client allows (admin/client.py)
n = struct.unpack(">I", s.recv(4))[0]
print(s.recv(n).decode())
"""


class Notifications:
    """The NOTIFY_SOCKET systemd would own: collects every datagram the daemon sends."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.seen: list[str] = []

    def wait_for(self, needle: str, timeout: float, daemon: subprocess.Popen, log: Path) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for datagram in self.seen:
                if needle in datagram:
                    self.seen.remove(datagram)
                    return datagram
            assert daemon.poll() is None, f"daemon exited {daemon.returncode}: {log.read_text()[-3000:]}"
            try:
                self.seen.append(self.sock.recv(4096).decode())
            except TimeoutError:
                pass
        raise AssertionError(f"no {needle!r} from the daemon within {timeout} s; got {self.seen[-5:]}")


@pytest.fixture
def place():
    """A short, world-traversable directory: socket paths must fit 107 bytes, and the intruder must be able
    to reach the admin socket (its mode and group let it connect; only its credentials keep it out)."""
    path = Path(tempfile.mkdtemp(prefix="fh-ops-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start(cli_env, place: Path, journal: str, n: int, watchdog_usec: int = 2_000_000) -> tuple[subprocess.Popen, Path]:
    log = place / f"daemon-{n}.log"
    env = {**cli_env, "NOTIFY_SOCKET": str(place / "notify"), "WATCHDOG_USEC": str(watchdog_usec)}
    with log.open("w") as stderr:  # the daemon's own copy stays open; the test's is closed here
        daemon = subprocess.Popen(
            [sys.executable, "-m", "foxhunt", "run", "--journal", journal, "--config", str(place / "foxhunt.toml"),
             "--feed", f"synthetic:seed={n},n=1000000000,rate=2000", "--log-level", "info"],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )
    return daemon, log


def admin(place: Path, *argv: str) -> dict:
    conn = Connection(place / "admin.sock", timeout=20)
    try:
        reply = conn.ask(list(argv))
    finally:
        conn.close()
    assert reply.ok, f"{argv}: {reply.error}"
    return reply.result


def write_config(place: Path, collar: int) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    group = "nogroup" if os.geteuid() == 0 else ""  # as root: let `nobody` reach the socket
    (place / "foxhunt.toml").write_text(CONFIG.format(socket=place / "admin.sock", group=group, me=me, collar=collar))


def journal_messages(dsn: str, name: str) -> list:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT e.payload FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s ORDER BY e.seq",
            (name,),
        ).fetchall()
    return [codec.decode(payload) for (payload,) in rows]


def test_the_daemon_under_systemd_and_an_operator(cli_env, pg_dsn, journal_name, place):
    notes = Notifications(place / "notify")
    write_config(place, collar=500)
    daemon, log = start(cli_env, place, journal_name, 1)
    try:
        ready = notes.wait_for("READY=1", 120, daemon, log)
        assert "STATUS=ACTIVE journal=" in ready
        notes.wait_for("WATCHDOG=1", 5, daemon, log)
        notes.wait_for("WATCHDOG=1", 5, daemon, log)  # keeps coming, from the trading loop

        status = admin(place, "status")
        assert status["trading_state"] == "ACTIVE" and status["venues"] == {"SIM": "connected"}
        assert status["last_seq"] > 0 and status["rates_per_s"]["inputs"] >= 0
        assert status["denials_held_back"] >= 0 and isinstance(status["denial_windows"], list)
        assert "denials_held_back=" in ready
        halted = admin(place, "halt", "--reason", "operator test")
        assert halted["trading_state"] == "HALTED"
        changed = admin(place, "limit", "set", "max_order_qty", "500000", "--reason", "smaller tickets")
        assert changed["derived"][0]["event"]["value"] == "500000"
        assert admin(place, "kill", "--reason", "drill")["trading_state"] == "HALTED"
        assert admin(place, "resume", "--reason", "drill over")["trading_state"] == "ACTIVE"
        for query in (["positions"], ["orders", "--open"], ["pnl"], ["risk"], ["config"], ["journal", "tail", "-n", "3"]):
            admin(place, *query)
        risk = admin(place, "risk")
        assert risk["limits"]["max_order_qty"] == "500000" and risk["denials_held_back"] >= 0
        assert admin(place, "models") == {"scoring": "off: the strategy reads no model scores", "strategy": "ema_cross"}

        # garbage, an oversized frame and a silent client: answered or cut off, the daemon carries on
        with socket.socket(socket.AF_UNIX) as junk, socket.socket(socket.AF_UNIX) as silent:
            silent.connect(str(place / "admin.sock"))
            junk.connect(str(place / "admin.sock"))
            junk.sendall(b"\x7f\xff\xff\xffGET / HTTP/1.1\r\n")
            junk.settimeout(5)
            assert b"limit is 65536" in junk.recv(4096)
            assert admin(place, "status")["trading_state"] == "ACTIVE"

        # the one-shot CLI, as a script would use it
        cli = subprocess.run([sys.executable, "-m", "foxhunt", "admin", "--config", str(place / "foxhunt.toml"),
                              "-c", "strategy pause ema_cross --reason 'cli test'", "--json"],
                             env=cli_env, capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["result"]["derived"][0]["kind"] == "StrategyStateChanged"
        risk = subprocess.run([sys.executable, "-m", "foxhunt", "risk", "show", "--config", str(place / "foxhunt.toml"),
                               "--json"], env=cli_env, capture_output=True, text=True, timeout=60)
        assert risk.returncode == 0, risk.stderr
        assert {"trading_state", "limits", "usage", "breakers"} <= set(json.loads(risk.stdout)["result"]), risk.stdout
        bad = subprocess.run([sys.executable, "-m", "foxhunt", "admin", "--config", str(place / "foxhunt.toml"),
                              "-c", "halt"], env=cli_env, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "needs --reason" in bad.stderr
        # the REPL, fed by a pipe: errors are answered and it carries on until quit
        repl = subprocess.run([sys.executable, "-m", "foxhunt", "admin", "--config", str(place / "foxhunt.toml")],
                              input="status\nbogus 'unclosed\nbogus\nhelp kill\nquit\n",
                              env={**cli_env, "HOME": str(place)}, capture_output=True, text=True, timeout=60)
        assert repl.returncode == 0, repl.stderr
        assert "trading_state" in repl.stdout and "kill --reason TEXT" in repl.stdout
        assert "No closing quotation" in repl.stderr and "unknown command 'bogus'" in repl.stderr
        assert (place / ".foxhunt_admin_history").exists()

        if os.geteuid() == 0:  # a real other user, whose only obstacle is the peer-credential check
            intruder = subprocess.run(["/usr/bin/python3", "-c", INTRUDER, str(place / "admin.sock")],
                                      user="nobody", group="nogroup", extra_groups=[], capture_output=True, text=True,
                                      timeout=30)
            assert "permission denied for user nobody" in intruder.stdout, intruder.stderr

        # SIGHUP: the risk limit changes through the journal, the rest is named as needing a restart
        write_config(place, collar=400)
        (place / "foxhunt.toml").write_text((place / "foxhunt.toml").read_text() + "[journal]\nbatch_max = 5000\n")
        daemon.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while '"event":"config_reloaded"' not in log.read_text():  # logged once the journal has it
            assert time.monotonic() < deadline, "SIGHUP did not change the limit"
            time.sleep(0.1)
        assert admin(place, "risk")["limits"]["collar_bps"] == 400
    finally:
        daemon.kill()  # SIGKILL, mid-run: the next start must recover
        daemon.wait()
    assert '"event":"admin_refused"' in log.read_text() or os.geteuid() != 0

    daemon, log = start(cli_env, place, journal_name, 2)
    try:
        notes.wait_for("READY=1", 120, daemon, log)
        assert admin(place, "status")["paused_strategies"] == ["ema_cross"]  # rebuilt from the journal
        time.sleep(0.5)
        daemon.send_signal(signal.SIGTERM)
        notes.wait_for("STOPPING=1", 20, daemon, log)
        assert daemon.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        notes.sock.close()

    messages = journal_messages(pg_dsn, journal_name)
    commands = [m for m in messages if type(m).__name__ == "AdminCommand"]
    me = pwd.getpwuid(os.geteuid()).pw_name
    operator_commands = [(c.command, c.reason) for c in commands if c.operator == me and c.operator_uid == os.geteuid()]
    assert operator_commands[:5] == [
        ("halt", "operator test"), ("limit", "smaller tickets"), ("kill", "drill"), ("resume", "drill over"),
        ("strategy", "cli test"),
    ]
    reload = next(m for m in messages if type(m).__name__ == "ConfigReloaded")
    assert reload.changed == ["collar_bps"] and reload.needs_restart == ["journal.batch_max"]
    assert type(messages[-1]).__name__ == "RunStopped" and messages[-1].reason == "signal SIGTERM"

    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                            env=cli_env, capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stderr
    # the state the restart rebuilt from the journal is the state replay computes at the same point
    restart_digest = recovered(log).get("state_digest")
    assert restart_digest is not None
    second_start = [i for i, m in enumerate(messages) if type(m).__name__ == "RunStarted"][1]  # its seq - 1
    replay_to_kill = subprocess.run(
        [sys.executable, "-c", REPLAY_UNTIL, journal_name, str(second_start)], env=cli_env, capture_output=True,
        text=True, timeout=300,
    )
    assert replay_to_kill.returncode == 0, replay_to_kill.stderr
    assert replay_to_kill.stdout.strip() == restart_digest


def test_a_halt_is_answered_within_a_second_while_the_service_manager_reads_nothing(cli_env, journal_name, place):
    """The operator's path when the service manager falls behind (an overloaded machine, a busy PID 1): its
    notify socket queues a few datagrams unread (net.unix.max_dgram_qlen), past which a blocking send
    stopped the daemon, and every answer with it (issue 63, case 14). A silent and a junk client are
    connected too. Status and halt are each answered within a second, again and again."""
    notes = Notifications(place / "notify")
    write_config(place, collar=500)
    daemon, log = start(cli_env, place, journal_name, 1, watchdog_usec=200_000)  # a heartbeat every 0.1 s
    try:
        notes.wait_for("READY=1", 120, daemon, log)  # and from here on, nobody reads the notify socket
        time.sleep(2.0)  # twenty heartbeats: the queue is full
        with socket.socket(socket.AF_UNIX) as junk, socket.socket(socket.AF_UNIX) as silent:
            silent.connect(str(place / "admin.sock"))
            junk.connect(str(place / "admin.sock"))
            junk.sendall(b"\x7f\xff\xff\xffGET / HTTP/1.1\r\n")
            took = []
            for i in range(5):
                for argv in (["status"], ["halt", "--reason", f"drill {i}"], ["resume", "--reason", f"drill {i}"]):
                    started = time.monotonic()
                    admin(place, *argv)
                    took.append(time.monotonic() - started)
                time.sleep(0.3)
        assert max(took) < 1.0, took
        assert '"event":"sd_notify_dropped"' in log.read_text()
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        notes.sock.close()
    assert daemon.returncode == 0, log.read_text()[-3000:]


# Replays the journal's inputs up to a sequence number through a fresh kernel built as replay builds it,
# and prints its state digest: what the restarted daemon must have rebuilt.
REPLAY_UNTIL = """
import sys, anyio
from foxhunt import bootstrap, config
from foxhunt.runtime.recovery import recover, trading_config

async def main(name, upto):
    cfg = config.load(None)
    store = await bootstrap.open_store(cfg, bootstrap.resolve_dsn(cfg))
    trading = await trading_config(store, name, None, None)
    recovery = await recover(store, name, trading, int(upto), use_snapshots=False)
    print(recovery.kernel.state_digest())

anyio.run(main, *sys.argv[1:])
"""


SCORING = """
[strategy]
name = "ensemble"
[strategy.ensemble]
models = ["{model}"]
entry_bps = 0.0
full_bps = 0.5
"""


def with_models(place: Path, strategy: str) -> None:
    """The configuration's strategy section, and its models from the store in `place`, served on the CPU."""
    with (place / "foxhunt.toml").open("a") as f:
        f.write(f'{strategy}\n[models]\nstore = "{place / "models"}"\n[scoring]\ndevice = "cpu"\n')


def until_calls(place: Path, model_id: str, calls: int) -> dict:
    """The model's line of `models` once it has answered `calls` times (at most 30 s)."""
    deadline = time.monotonic() + 30
    while (models := admin(place, "models")["models"][model_id])["calls"] < calls:
        assert time.monotonic() < deadline, models
        time.sleep(0.2)
    return models


@contextmanager
def stopped_at_the_end(cli_env, place: Path, journal: str, n: int) -> Iterator[tuple[subprocess.Popen, Notifications, Path]]:
    """The daemon on `journal`, stopped by SIGTERM once the block is done (it must exit 0), killed if the
    block failed."""
    notes = Notifications(place / "notify")
    daemon, log = start(cli_env, place, journal, n)
    try:
        yield daemon, notes, log
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(60) == 0, log.read_text()[-3000:]
    finally:
        notes.sock.close()
        if daemon.poll() is None:
            daemon.kill()


def verified(cli_env, place: Path, journal: str) -> dict:
    """`foxhunt replay JOURNAL --verify` with the daemon's configuration, its summary."""
    done = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal, "--verify", "--json", "--config",
                           str(place / "foxhunt.toml")], env=cli_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_model_missing_at_start_reduces_trading_and_a_resume_loads_it_once_it_is_in_the_store(
        cli_env, pg_dsn, journal_name, place):
    """The daemon starts without its model: no crash, trading REDUCING, the operator told (status, models,
    STATUS=); the model put in the store, an operator's resume loads it, and it scores; the journal holds
    the failure, the resume and both loads, and verifies with every score recomputed."""
    model_id, stored = files()
    write_config(place, collar=500)
    with_models(place, SCORING.format(model=model_id))
    with stopped_at_the_end(cli_env, place, journal_name, 5) as (daemon, notes, log):
        ready = notes.wait_for("READY=1", 120, daemon, log)
        assert "STATUS=REDUCING" in ready and "models_failed=1" in ready
        status = admin(place, "status")
        assert status["trading_state"] == "REDUCING" and status["models_failed"] == [model_id]
        models = admin(place, "models")["models"][model_id]
        assert models["state"] == "failed" and "no model" in models["reason"] and models["failures"] == 1
        LocalModelStore(place / "models").put(model_id, stored)
        assert admin(place, "resume", "--reason", "model restored")["trading_state"] == "ACTIVE"
        serving = until_calls(place, model_id, 20)
        assert serving["state"] == "serving" and serving["latency_us"]["p50"] > 0
        assert admin(place, "status")["models_failed"] == []
    kinds = [type(m).__name__ for m in journal_messages(pg_dsn, journal_name)]
    assert kinds.count("ModelsLoaded") == 2 and kinds.count("ModelFailed") == 1
    assert kinds.index("ModelFailed") < kinds.index("AdminCommand") < len(kinds) - 1 - kinds[::-1].index("ModelsLoaded")
    assert kinds.count("ModelScored") >= 20
    assert verified(cli_env, place, journal_name)["scores"].startswith("identical")


AGENT = """
[strategy]
name = "agent"
[strategy.agent]
policy = "{policy}"
"""


def test_a_served_agent_decides_under_the_daemon_shows_in_models_and_its_journal_verifies(
        cli_env, pg_dsn, journal_name, place):
    """The daemon as systemd runs it, serving a stored agent: `models` on the admin socket shows the policy
    serving with its latency; a halt stops its orders, not its decisions; after SIGTERM the journal's
    decisions verify, every one recomputed."""
    policy_id, stored = agent_files("ppo")
    LocalModelStore(place / "models").put(policy_id, stored)
    write_config(place, collar=500)
    with_models(place, AGENT.format(policy=policy_id))
    with stopped_at_the_end(cli_env, place, journal_name, 6) as (daemon, notes, log):
        ready = notes.wait_for("READY=1", 120, daemon, log)
        assert "STATUS=ACTIVE" in ready
        models = until_calls(place, policy_id, 20)
        assert models["kind"] == "policy" and models["state"] == "serving" and models["symbol"] == "EURUSD"
        assert models["latency_us"]["p50"] > 0 and models["parameter_sha256"]
        halted = admin(place, "halt", "--reason", "agent under review")
        assert halted["trading_state"] == "HALTED"
        until_calls(place, policy_id, admin(place, "models")["models"][policy_id]["calls"] + 20)  # it still decides
    messages = journal_messages(pg_dsn, journal_name)
    kinds = [type(m).__name__ for m in messages]
    halt = kinds.index("AdminCommand")
    assert kinds.count("ModelsLoaded") == 1 and kinds.count("PolicyActed") >= 40
    assert kinds[halt:].count("PolicyActed") >= 20 and "SubmitOrder" not in kinds[halt:]
    result = verified(cli_env, place, journal_name)
    assert result["decisions"].startswith("identical") and result["decisions_recomputed"] == kinds.count("PolicyActed")
