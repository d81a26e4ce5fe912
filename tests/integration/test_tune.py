"""`foxhunt tune` on a real local Ray (and, for the command, the session's PostgreSQL): a search of four trials
stores its best model, whose manifest names the search, and a plain `foxhunt train` with the best trial's
values makes the same weights; a trial whose worker dies resumes from its checkpoint and ends as if it had
not; a search with one worker is reproducible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cli import foxhunt, ok, summary

pytest.importorskip("ray", reason="foxhunt[sweep] is installed by scripts/test")
pytest.importorskip("optuna", reason="foxhunt[sweep] is installed by scripts/test")

ROOT = Path(__file__).resolve().parents[2]
TINY = {"FOXHUNT_TRAIN__MAX_STEPS": "40", "FOXHUNT_TRAIN__EVAL_EVERY": "10", "FOXHUNT_TRAIN__WINDOW": "8"}


@pytest.mark.postgres
def test_a_tune_of_four_trials_stores_its_best_model_and_a_plain_train_of_its_values_makes_the_same(
        cli_env, journal_name, tmp_path):
    ok("run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=4000", "--clock", "feed", env=cli_env)
    env = cli_env | TINY
    store = str(tmp_path / "models")
    space = ["--space", "train.learning_rate=log:0.0003:0.01", "--space", "train.models.mlp.hidden=choice:8|16"]
    tuned = foxhunt("tune", "mlp", "--journal", journal_name, *space, "--trials", "4", "--workers", "2", "--seed", "5",
                    "--out", store, "--name", f"{journal_name}-tune", "--report", str(tmp_path / "tune.html"),
                    "--json", env=env, timeout=300)
    assert tuned.returncode == 0, tuned.stderr
    done = json.loads(tuned.stdout)
    trials = done["trials"]
    assert len(trials) == 4 and all(t["error"] == "" and t["ended"] in ("finished", "stopped") for t in trials)
    for t in trials:
        values = dict(o.split("=", 1) for o in t["overrides"])
        assert 0.0003 <= float(values["train.learning_rate"]) <= 0.01 and values["train.models.mlp.hidden"] in ("8", "16")
    finished = [t for t in trials if t["ended"] == "finished"]
    best = min(finished, key=lambda t: t["metrics"]["validation_loss"])
    assert done["best"] == best["trial"] and done["model"] == best["metrics"]["model"]
    page = (tmp_path / "tune.html").read_text()
    assert 'id="fig-parallel"' in page and 'id="fig-heatmap"' not in page  # drawn values make no grid

    shown = json.loads(ok("models", "show", done["model"], "--store", store, env=env).stdout)
    search = shown["training"]["search"]
    assert search["name"] == f"{journal_name}-tune" and search["chosen_trial"] == best["trial"]
    assert search["trials"] == 4 and search["overrides"] == best["overrides"] and search["metric"] == "validation_loss"
    assert "TPESampler(seed=5)" in search["sampler"] and "ASHA" in search["scheduler"]
    assert shown["training"]["best_validation_loss"] == best["metrics"]["validation_loss"]

    sets = [arg for o in best["overrides"] for arg in ("--set", o)]
    alone = summary("train", "mlp", "--journal", journal_name, "--seed", "5", *sets, "--out", str(tmp_path / "other"),
                    env=env)
    assert alone["parameter_sha256"] == shown["parameter_sha256"]  # the trial is `foxhunt train`, bit for bit

    # mistakes are named before Ray starts or any data is read
    for args, message in [(["--space", "train.learnin_rate=log:0.001:0.01"], "learnin_rate"),
                          (["--space", "train.models.mlp.hidden=choice:0|8"], "hidden")]:
        refused = foxhunt("tune", "mlp", "--journal", journal_name, *args, env=env)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    # a resume with another seed (or data, or --set) would mix two searches in one table: refused before Ray starts
    other = foxhunt("tune", "mlp", "--journal", journal_name, "--trials", "4", "--seed", "6", "--out", store,
                    "--name", f"{journal_name}-tune", "--resume", env=env)
    assert other.returncode == 2 and "resume it as it was started" in other.stderr, other.stderr
    # a trial that asks for a GPU this machine's Ray does not have is refused, not left waiting for ever
    greedy = foxhunt("tune", "mlp", "--journal", journal_name, "--space", "train.learning_rate=log:0.001:0.01",
                     "--trials", "1", "--workers", "1", "--gpus-per-trial", "2", env=env)
    assert greedy.returncode == 2 and "--gpus-per-trial 2: Ray on this machine has" in greedy.stderr, greedy.stderr


DRIVER = """
import sys
from pathlib import Path
from foxhunt.config import Config, override
from foxhunt.training import trainables, tune
from foxhunt.training.dataset import Source
from tests.ml.market import columns_by_symbol, messages
from tests.sweep_points import DiesOnce

directory, name, die, resume = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "die", sys.argv[3] == "resume"
cfg = override(Config(), ["train.max_steps=40", "train.eval_every=10", "train.window=8"])
trainable = trainables.ForecasterTrainable(cfg, "mlp", "tiny", "cpu", columns_by_symbol(messages(3000, seed=2)),
                                           [Source(journal="synthetic", first_seq=1, last_seq=3000, events=3000)])
space = (tune.saved_space(directory / "tunes" / name) if resume else
         tune.space(["train.learning_rate=log:0.0003:0.01", "train.models.mlp.layers=int:1:3"], ["train"]))
trainable = DiesOnce(trainable, str(directory)) if die else None if resume else trainable  # None: nothing may run
outcomes = tune.run(trainable, space, 2, "validation_loss", "min",
                    7, directory / "tunes", name, 1, resume=resume, retries=1, evaluations=5)
for o in outcomes:
    print(o.trial, " ".join(o.overrides), o.ended, o.metrics.get("validation_loss"), o.metrics.get("model"),
          o.error or "-", sep="\\t")
"""


def search(tmp_path: Path, name: str, how: str) -> list[list[str]]:
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path), name, how],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.split("\t") for line in done.stdout.splitlines() if line[:1].isdigit()]


def test_a_trial_whose_worker_dies_resumes_from_its_checkpoint_one_worker_makes_the_same_search_and_resume_reruns_nothing(
        tmp_path):
    killed = search(tmp_path, "killed", "die")
    assert (tmp_path / "died").exists()  # the first trial's worker died after its first checkpoint,
    assert (tmp_path / "resumed").exists()  # and the trial started again from that checkpoint
    whole = search(tmp_path, "whole", "whole")
    assert len(killed) == 2 and all(row[-1] == "-" for row in killed)
    assert killed == whole  # the same values, the same trials stopped or finished, the same weights
    assert search(tmp_path, "whole", "resume") == whole  # a finished search resumed: its results, nothing run again
