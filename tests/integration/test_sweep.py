"""`foxhunt sweep` on a real local Ray and the session's PostgreSQL: a sweep's results equal the same replays run
one by one; a failing point is reported and the others finish; a worker killed mid-trial is retried; an
interrupted sweep resumes without running a finished point again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foxhunt import config
from tests.integration.test_cli import foxhunt, ok, summary

pytest.importorskip("ray", reason="foxhunt[sweep] is installed by scripts/test")
pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


def test_a_sweep_through_ray_equals_the_same_replays_one_by_one(cli_env, journal_name, tmp_path):
    ok("run", "--journal", journal_name, "--feed", "synthetic:seed=11,n=4000", "--clock", "feed", env=cli_env)
    best = tmp_path / "best.toml"
    done = summary("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5,10",
                   "--grid", "strategy.ema_cross.slow=30,40", "--workers", "2", "--metric", "pnl",
                   "--out", str(best), "--report", str(tmp_path / "sweep.html"), "--name", f"{journal_name}-grid",
                   env=cli_env)
    points = done["points"]
    assert [p["overrides"] for p in points] == [
        [f"strategy.ema_cross.fast={f}", f"strategy.ema_cross.slow={s}"] for f in (5, 10) for s in (30, 40)]
    for point in points:
        sets = [arg for o in point["overrides"] for arg in ("--set", o)]
        alone = summary("replay", journal_name, *sets, env=cli_env)
        assert point["error"] == "" and point["metrics"][f"state_digest.{journal_name}"] == alone["state_digest"]
        assert point["metrics"]["orders"] == alone["orders"] and point["metrics"]["fills"] == alone["fills"]
        assert point["metrics"][f"pnl.{journal_name}"] == pytest.approx(float(alone["pnl"]["USD"]), abs=1e-9)
    assert 'id="fig-heatmap"' in (tmp_path / "sweep.html").read_text()
    winner = max(points, key=lambda p: (p["metrics"]["pnl"], -p["index"]))
    assert done["best"] == winner["index"]
    # the best point's configuration is one the daemon loads, and it is that point's
    loaded = config.load(best, env={}).trading()
    fast, slow = (int(o.split("=")[1]) for o in winner["overrides"])
    assert (loaded.strategy.ema_cross.fast, loaded.strategy.ema_cross.slow) == (fast, slow)
    # a mistake is refused before Ray starts, naming it
    refused = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fats=5,10", env=cli_env)
    assert refused.returncode == 2 and "fats" in refused.stderr
    taken = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5", "--name",
                    f"{journal_name}-grid", env=cli_env)
    assert taken.returncode == 2 and "--resume it, or give another --name" in taken.stderr
    # a finished sweep resumed as it was started runs nothing and gives the same table; with another --set, refused
    grid = ["--grid", "strategy.ema_cross.fast=5,10", "--grid", "strategy.ema_cross.slow=30,40"]
    resumed = summary("sweep", "--journal", journal_name, *grid, "--workers", "2", "--metric", "pnl", "--name",
                      f"{journal_name}-grid", "--resume", env=cli_env)
    assert resumed["points"] == points and resumed["best"] == done["best"]
    other = foxhunt("sweep", "--journal", journal_name, *grid, "--set", "venue.fee_bps=0.3", "--name",
                    f"{journal_name}-grid", "--resume", env=cli_env)
    assert other.returncode == 2 and "resume it as it was started" in other.stderr, other.stderr
    # a point that asks for more than this machine's Ray has is refused, not left waiting for ever
    greedy = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5", "--workers", "1",
                     "--gpus-per-trial", "4", "--name", f"{journal_name}-gpus", env=cli_env)
    assert greedy.returncode == 2 and "--gpus-per-trial 4: Ray on this machine has" in greedy.stderr
    too_many = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5", "--workers", "1",
                       "--cpus-per-trial", "2", "--name", f"{journal_name}-cpus", env=cli_env)
    assert too_many.returncode == 2 and "--cpus-per-trial 2: Ray on this machine has 1 CPU" in too_many.stderr
    again = foxhunt("sweep", "--journal", journal_name, "--grid", "strategy.ema_cross.fast=5", "--workers", "1",
                    "--name", f"{journal_name}-cpus", env=cli_env)
    assert again.returncode == 0, again.stderr  # the refused sweep left nothing behind its name


DRIVER = """
import sys
from pathlib import Path
from foxhunt.training import sweep
from tests.sweep_points import Recording

directory, name, resume, values = sys.argv[1], sys.argv[2], sys.argv[3] == "resume", sys.argv[4].split(",")
points = [(f'x="{v}"',) for v in values]
heard = []
outcomes = sweep.run(Recording(directory), points, 100, Path(directory) / "sweeps", name, 2, resume=resume, retries=1,
                     progress=lambda *counts: heard.append(counts))
for o in outcomes:
    print(o.index, o.metrics.get("score"), o.metrics.get("seed"), o.error or "-", o.metrics.get("worker"), sep="\\t")
print("progress", *heard[-1], len(heard))  # done, failed, total, and how many times it was heard
"""


def drive(tmp_path: Path, name: str, values: str, resume: bool = False, **kw) -> subprocess.Popen:
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), name, "resume" if resume else "new", values],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def rows(process: subprocess.Popen) -> list[list[str]]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return [line.split("\t") for line in out.splitlines() if line and (line[0].isdigit() or line[:8] == "progress")]


def runs(tmp_path: Path, x: str) -> int:
    path = tmp_path / f"ran-{x}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def kept(record: Path) -> int:
    """The points a sweep's record holds (its first line is the points themselves)."""
    return max(0, len(record.read_text().splitlines()) - 1) if record.exists() else 0


def test_a_failing_point_is_reported_a_killed_worker_retried_and_the_others_finish(tmp_path):
    table = rows(drive(tmp_path, "faults", "a,fail,die,bbbb"))
    assert table.pop() == ["progress 4 1 4 5"]  # at the start, then at each point's end: 4 done, 1 failed
    assert [r[0] for r in table] == ["0", "1", "2", "3"]
    assert table[0][1:3] == ["1.0", "100"] and table[3][1:3] == ["4.0", "103"]  # seed: the sweep's plus the index
    assert "this point cannot be computed" in table[1][3]
    assert table[2][1] == "3.0" and runs(tmp_path, "die") == 2  # killed once, retried, finished
    # Ray started here has its raylet retry a connection after 100 ms, not a second, its workers import the
    # trainable's module before their first point (sweep.RAY_START), and its object store is sweep.OBJECT_STORE_BYTES,
    # not 30% of the machine's memory; the worker started again after the kill too
    assert [r[4] for r in table if r[3] == "-"] == ["100 ms tests.sweep_points 512 MiB"] * 3


def test_an_interrupted_sweep_resumes_without_running_a_finished_point_again(tmp_path):
    first = drive(tmp_path, "resumed", "a,bb,slow,slow2")
    deadline = time.monotonic() + 120
    record = tmp_path / "sweeps" / "resumed" / "points.jsonl"
    while not (runs(tmp_path, "slow") and kept(record) == 3) and time.monotonic() < deadline:
        time.sleep(0.2)  # a, bb and slow2 are done and kept; slow waits
    first.send_signal(signal.SIGINT)  # Ctrl-C
    _, err = first.communicate(timeout=120)
    assert first.returncode != 0 and "interrupted with 3 of 4 points done" in err and "--resume" in err
    assert runs(tmp_path, "a") == 1 and runs(tmp_path, "bb") == 1
    (tmp_path / "go").write_text("")
    table = rows(drive(tmp_path, "resumed", "a,bb,slow,slow2", resume=True))
    assert table.pop() == ["progress 1 0 1 2"]  # only slow ran
    assert [r[1] for r in table] == ["1.0", "2.0", "4.0", "5.0"]
    assert runs(tmp_path, "a") == runs(tmp_path, "bb") == runs(tmp_path, "slow2") == 1  # finished: not run again
    assert runs(tmp_path, "slow") == 2
