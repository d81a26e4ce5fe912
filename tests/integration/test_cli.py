"""End to end: the `foxhunt` command in subprocesses, against the session's PostgreSQL."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.postgres


def foxhunt(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "foxhunt", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def ok(*args: str, env: dict) -> subprocess.CompletedProcess:
    done = foxhunt(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done


def summary(*args: str, env: dict) -> dict:
    return json.loads(ok(*args, "--json", env=env).stdout)


def journal_lines(name: str, env: dict) -> list[str]:
    return ok("journal", "show", name, env=env).stdout.splitlines()


@pytest.mark.parametrize("clock", ["wall", "feed"])
def test_run_then_verify_reproduces_every_derived_event(cli_env, journal_name, clock):
    # live on the wall clock: the feed paced in real time, as a live one comes (the throttles measure on it)
    feed = "synthetic:seed=11,n=6000" + (",rate=1500" if clock == "wall" else "")
    run = summary("run", "--journal", journal_name, "--feed", feed, "--clock", clock, env=cli_env)
    assert run["stopped"] == "feed ended" and run["orders"] > 20 and run["fills"] > 20
    verify = summary("replay", journal_name, "--verify", env=cli_env)
    # command, verdict and position change at least, for each order whose denial was not held back
    assert verify["verified"] >= 3 * (run["orders"] - run["denials_held_back"])
    for key in ("orders", "fills", "pnl", "max_drawdown", "positions"):
        assert verify[key] == run[key], key
    backtest = summary("replay", journal_name, env=cli_env)
    assert backtest["mode"] == "backtest" and backtest["orders"] == run["orders"]


def test_a_changed_strategy_parameter_fails_verify_at_the_first_differing_event(cli_env, journal_name):
    ok("run", "--journal", journal_name, "--feed", "synthetic:seed=11,n=3000", "--clock", "feed", env=cli_env)
    done = foxhunt("replay", journal_name, "--verify", "--set", "strategy.ema_cross.slow=41", env=cli_env)
    assert done.returncode == 1
    assert "diverged" in done.stderr and "recorded:" in done.stderr and "replayed:" in done.stderr
    cause = int(re.search(r"caused by input seq (\d+)", done.stderr).group(1))
    # The first recorded decision is where the recording and a slower EMA can first part; replay stops
    # there or earlier (where the changed kernel decided first), never later.
    first_recorded = next(line for line in journal_lines(journal_name, cli_env) if "\tSubmitOrder\t" in line)
    assert cause <= int(first_recorded.split("\t")[1])
    # a what-if backtest with the same change runs and reports its own result
    assert summary("replay", journal_name, "--set", "strategy.ema_cross.slow=41", env=cli_env)["mode"] == "backtest"


def test_a_record_runs_on_its_own_time_unless_told_and_then_is_warned_of_the_throttles(cli_env, journal_name):
    """A record read as fast as it can be, stamped with the wall clock, asked for orders at a thousand a
    second of real time, and the throttles (which measure on the run's clock) denied most of them."""
    default = summary("run", "--journal", journal_name, "--feed", "synthetic:seed=3,n=3000", env=cli_env)
    recorded = journal_lines(journal_name, cli_env)
    assert '"clock":"feed"' in "".join(line for line in recorded if "\tRunStarted\t" in line)
    assert not any("ORDER_THROTTLE" in line for line in recorded) and default["orders"] > 10
    walled = foxhunt("run", "--journal", f"{journal_name}-wall", "--feed", "synthetic:seed=3,n=3000", "--clock", "wall",
                     env=cli_env)
    assert walled.returncode == 0 and "wall_clock_on_a_record" in walled.stderr


def test_two_feed_clock_runs_of_the_same_feed_and_seed_record_the_same_events(cli_env, journal_name):
    a, b = f"{journal_name}-a", f"{journal_name}-b"
    for name in (a, b):
        ok("run", "--journal", name, "--feed", "synthetic:seed=3,n=2000", "--clock", "feed", env=cli_env)
    assert journal_lines(a, cli_env) == journal_lines(b, cli_env)


@pytest.mark.faults
def test_a_second_writer_is_refused_and_sigterm_stops_cleanly(cli_env, journal_name):
    first = subprocess.Popen(
        [sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--feed", "synthetic:seed=1,n=100000000",
         "--duration", "60", "--json"],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while journal_name not in foxhunt("journal", "list", env=cli_env).stdout:
            assert time.monotonic() < deadline and first.poll() is None, "first writer did not start"
            time.sleep(0.2)
        second = foxhunt("run", "--journal", journal_name, "--feed", "synthetic:n=10", env=cli_env)
        assert second.returncode == 2
        assert f"journal '{journal_name}' is held by another writer: foxhunt writer pid={first.pid}" in second.stderr
        # trading, not starting (a stop during start-up is its own test, below): the feed's quotes are journaled
        while "\tQuoteTick\t" not in ok("journal", "show", journal_name, "--limit", "50", env=cli_env).stdout:
            assert time.monotonic() < deadline + 30 and first.poll() is None, "first writer did not trade"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(out)["stopped"] == "signal SIGTERM"
    last = journal_lines(journal_name, cli_env)[-1]
    assert "\tRunStopped\t" in last and "signal SIGTERM" in last
    assert summary("replay", journal_name, "--verify", env=cli_env)["events"] == json.loads(out)["last_seq"]


@pytest.mark.faults
def test_a_restarted_run_recovers_and_the_whole_journal_still_verifies(cli_env, journal_name):
    first = summary("run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=5000", "--clock", "feed",
                    "--max-events", "2000", env=cli_env)
    assert first["stopped"] == "max-events"
    second = summary("run", "--journal", journal_name, "--feed", "synthetic:seed=9,n=1500", "--clock", "feed",
                     env=cli_env)
    assert second["orders"] > first["orders"]  # the kernel resumed with the first run's orders
    assert summary("replay", journal_name, "--verify", env=cli_env)["events"] == second["last_seq"]


def test_zscore_strategy_with_limit_orders_verifies(cli_env, journal_name, tmp_path):
    config = tmp_path / "z.toml"
    config.write_text('[strategy]\nname = "zscore"\n[strategy.zscore]\nwindow = 30\nentry_z = 1.5\n')
    run = summary("run", "--config", str(config), "--journal", journal_name, "--feed", "synthetic:seed=2,n=8000",
                  "--clock", "feed", env=cli_env)
    assert run["orders"] > 10
    assert "OrderCanceled" in "".join(journal_lines(journal_name, cli_env))  # ttl cancels happened
    summary("replay", journal_name, "--verify", env=cli_env)


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is not beside this checkout")
@pytest.mark.parametrize("name", ["histdata-eurusd-ticks-2020-01-01.csv", "fxcm-gbpusd-m1-bid-2012.csv",
                                  "truefx-usdjpy-ticks-2013.csv"])
def test_real_market_data_runs_and_verifies(cli_env, journal_name, name):
    run = summary("run", "--journal", journal_name, "--feed", f"csv:{SHARED_DATA / name}", "--clock", "feed",
                  env=cli_env)
    assert run["orders"] > 0
    assert summary("replay", journal_name, "--verify", env=cli_env)["verified"] > 0


@pytest.mark.faults
def test_a_bad_row_mid_file_stops_the_run_cleanly_and_is_recorded(cli_env, journal_name, tmp_path):
    rows = "".join(f"2020-01-01 00:00:{i:02d}+00:00,1.1000{i % 3},1.1001{i % 7}\n" for i in range(50))
    path = tmp_path / "eurusd.csv"
    path.write_text("timestamp,bid,ask\n" + rows + "2020-01-01 00:01:00+00:00,nan,1.1\n")
    done = foxhunt("run", "--journal", journal_name, "--feed", f"csv:{path}", env=cli_env)
    assert done.returncode == 2 and f"{path}:52: bid: not a decimal number: 'nan'" in done.stderr
    lines = journal_lines(journal_name, cli_env)
    # every row read before the bad one is journaled, then the error where it stood, then the stop
    assert sum("\tQuoteTick\t" in line for line in lines) == 50
    gap = next(line for line in lines if "\tFeedGap\t" in line)
    assert f"{path}:52" in gap and lines.index(gap) > max(i for i, line in enumerate(lines) if "\tQuoteTick\t" in line)
    assert "\tRunStopped\t" in lines[-1] and "feed error" in lines[-1]
    skipped = summary("run", "--journal", f"{journal_name}-skip", "--feed", f"csv:{path}", "--on-bad-row", "skip",
                      env=cli_env)
    assert skipped["stopped"] == "feed ended"
    assert any("\tFeedGap\t" in line for line in journal_lines(f"{journal_name}-skip", cli_env))


def test_errors_exit_2_with_a_message(cli_env, tmp_path):
    done = foxhunt("replay", "no-such-journal", "--verify", env=cli_env)
    assert done.returncode == 2 and "no journal named 'no-such-journal'" in done.stderr
    assert foxhunt("run", env=cli_env).returncode == 2  # usage: --journal is required
    bad = tmp_path / "bad.toml"
    bad.write_text("[strategy]\nnmae = 'x'\n")
    done = foxhunt("run", "--journal", "x", "--config", str(bad), env=cli_env)
    assert done.returncode == 2 and f"{bad}: strategy: Object contains unknown field `nmae`" in done.stderr
    done = foxhunt("run", "--journal", "x", "--feed", "csv:/nonexistent.csv", env=cli_env)
    assert done.returncode == 2 and "/nonexistent.csv: cannot read" in done.stderr


def test_an_unreachable_database_is_named_without_its_password(cli_env):
    env = {**cli_env, "FOXHUNT_DSN": "host=127.0.0.1 port=9 dbname=ledger user=trader password=hunter2"}
    done = foxhunt("journal", "list", env=env)
    assert done.returncode == 2
    assert "host=127.0.0.1 port=9 dbname=ledger user=trader" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


def test_db_commands(cli_env, state_dir):
    assert ok("db", "status", env=cli_env).stdout.startswith("running")
    assert ok("db", "dsn", env=cli_env).stdout.strip() == (
        f"host={state_dir.resolve()}/pg/run port=5432 dbname=foxhunt user=foxhunt"
    )
    assert "migration" in ok("db", "migrate", env=cli_env).stdout


def test_ingest_loads_market_data_to_backtest_and_refuses_what_makes_no_sense(cli_env, journal_name, tmp_path):
    rows = "".join(f"2020-01-01 00:{i // 60:02d}:{i % 60:02d}+00:00,1.1{i % 97:03d}0,1.1{i % 97 + 3:03d}0\n"
                   for i in range(3000))
    path = tmp_path / "eurusd.csv"
    path.write_text("timestamp,bid,ask\n" + rows)
    loaded = summary("ingest", str(path), "--journal", journal_name, env=cli_env)
    assert (loaded["rows"], loaded["last_seq"]) == (3000, 3002)  # plus RunStarted and RunStopped
    again = summary("ingest", f"csv:{path},symbol=EURUSD", "--journal", journal_name, env=cli_env)
    assert again["last_seq"] == 6004  # a second file goes on the same journal
    backtest = summary("replay", journal_name, env=cli_env)
    assert backtest["orders"] > 0 and backtest["mode"] == "backtest"
    done = foxhunt("replay", journal_name, "--verify", env=cli_env)
    assert done.returncode == 2 and "never traded: nothing to verify" in done.stderr
    done = foxhunt("run", "--journal", journal_name, "--feed", "synthetic:n=10", env=cli_env)
    assert done.returncode == 2 and "nothing to trade on" in done.stderr
    traded = f"{journal_name}-traded"
    ok("run", "--journal", traded, "--feed", "synthetic:n=100", "--clock", "feed", env=cli_env)
    done = foxhunt("ingest", str(path), "--journal", traded, env=cli_env)
    assert done.returncode == 2 and "was traded on" in done.stderr
    done = foxhunt("ingest", "none", "--journal", journal_name, env=cli_env)
    assert done.returncode == 2 and "ingest needs a feed to load" in done.stderr, done.stderr


@pytest.mark.faults
def test_a_stop_asked_for_during_start_up_is_honoured_once_the_journal_is_consistent(cli_env, journal_name):
    """SIGTERM in the first seconds of start-up took the default action: exit 143, nothing said. Now it is
    logged, the run starts (recovery done, the journal consistent) and stops at once, cleanly: exit 0."""
    ok("run", "--journal", journal_name, "--feed", "synthetic:n=2000", env=cli_env)  # a journal to recover
    daemon = subprocess.Popen(
        [sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--log-level", "info", "--json",
         "--feed", "synthetic:seed=3,n=1000000000"], env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not catches_sigterm(daemon.pid):  # foxhunt run has begun: nothing it does yet touches the journal
        assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read()
        time.sleep(0.005)
    daemon.send_signal(signal.SIGTERM)
    out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert "stop_requested" in err and "start-up" in err
    assert json.loads(out)["stopped"] == "signal SIGTERM during start-up"
    lines = journal_lines(journal_name, cli_env)
    assert "\tRunStopped\t" in lines[-1] and "signal SIGTERM during start-up" in lines[-1]
    assert sum("\tRunStarted\t" in line for line in lines) == 2  # the second run did start, then stop
    assert json.loads(ok("replay", journal_name, "--verify", "--json", env=cli_env).stdout)["verified"] > 0


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler of its own for SIGTERM (proc(5): SigCgt, a mask of signal numbers
    less one); Python installs none unless told."""
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(mask & 1 << (signal.SIGTERM - 1))
