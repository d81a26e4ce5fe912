"""A sweep's points (training/sweep.py): decided before Ray sees them, the same for the same command and seed."""

from __future__ import annotations

import pytest

from foxhunt.errors import ConfigError
from foxhunt.training import sweep
from foxhunt.training.sweep import Outcome


def test_a_grid_is_every_combination_the_first_key_slowest_values_as_toml():
    points = sweep.grid(["strategy.ema_cross.fast=5,10", "strategy.name=ema_cross,zscore", "venue.fee_bps=0.2"])
    assert points == [
        ("strategy.ema_cross.fast=5", 'strategy.name="ema_cross"', "venue.fee_bps=0.2"),
        ("strategy.ema_cross.fast=5", 'strategy.name="zscore"', "venue.fee_bps=0.2"),
        ("strategy.ema_cross.fast=10", 'strategy.name="ema_cross"', "venue.fee_bps=0.2"),
        ("strategy.ema_cross.fast=10", 'strategy.name="zscore"', "venue.fee_bps=0.2"),
    ]


def test_random_draws_are_seeded_and_within_their_spaces():
    specs = ["strategy.ema_cross.slow=int:20:80", "venue.fee_bps=float:0.1:0.5",
             "strategy.name=choice:ema_cross|zscore"]
    a, b, c = sweep.random(specs, 20, 7), sweep.random(specs, 20, 7), sweep.random(specs, 20, 8)
    assert a == b and a != c and len(a) == 20
    for slow, fee, name in a:
        assert 20 <= int(slow.split("=")[1]) <= 80 and 0.1 <= float(fee.split("=")[1]) <= 0.5
        assert name in ('strategy.name="ema_cross"', 'strategy.name="zscore"')


@pytest.mark.parametrize(("call", "message"), [
    (lambda: sweep.grid(["fast"]), "expected KEY=V1,V2"),
    (lambda: sweep.grid(["fast="]), "expected KEY=V1,V2"),
    (lambda: sweep.random(["x=gauss:0:1"], 3, 1), "expected KEY=int:LO:HI"),
    (lambda: sweep.random(["x=int:a:b"], 3, 1), "expected KEY=int:LO:HI"),
    (lambda: sweep.random(["x=int:1:2"], 0, 1), "at least one sample"),
])
def test_a_space_that_is_not_one_is_an_error_naming_it(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


def test_the_best_point_skips_failures_and_nan_and_takes_the_first_of_equals():
    outcomes = [Outcome(0, (), {"sharpe": 1.0}), Outcome(1, (), error="boom"), Outcome(2, (), {"sharpe": float("nan")}),
                Outcome(3, (), {"sharpe": 2.0}), Outcome(4, (), {"sharpe": 2.0})]
    assert sweep.best(outcomes, "sharpe").index == 3
    assert sweep.best(outcomes, "sharpe", "min").index == 0
    assert sweep.best(outcomes, "pnl") is None


def test_a_sweeps_record_keeps_each_finished_point_and_refuses_other_points(tmp_path):
    points, record = [("x=1",), ("x=2",), ("x=3",)], sweep.Record(tmp_path / "s")
    context = {"journals": ["a"], "sets": ["venue.fee_bps=0.2"], "rescore": False}
    record.create(points, 7, context)
    record.add(2, {"metrics": {"pnl": 1.5, "sharpe": float("nan")}, "error": ""})
    record.add(0, {"metrics": {}, "error": "ValueError: no"})
    done = record.finished(points, 7, context)
    assert sorted(done) == [0, 2] and done[0]["error"] == "ValueError: no" and done[2]["metrics"]["pnl"] == 1.5
    with pytest.raises(ConfigError, match="other points or another --seed"):
        record.finished(points, 8, context)
    with pytest.raises(ConfigError, match="other points"):
        record.finished(points[:2], 7, context)
    with pytest.raises(ConfigError, match="was started with .*venue.fee_bps=0.2.*, not .*venue.fee_bps=0.3"):
        record.finished(points, 7, context | {"sets": ["venue.fee_bps=0.3"]})  # a resume with another --set
    with pytest.raises(FileExistsError):
        record.create(points, 7, context)  # a sweep's directory is made once


def test_a_record_cut_short_by_a_crash_loses_only_the_point_being_written(tmp_path):
    points, record = [("x=1",), ("x=2",)], sweep.Record(tmp_path / "s")
    record.create(points, 1, {})
    record.add(1, {"metrics": {"pnl": 2.0}, "error": ""})
    with record.path.open("a") as f:
        f.write('{"index": 0, "metr')  # the machine went down mid-line
    assert sorted(record.finished(points, 1, {})) == [1]
    record.path.write_text(record.path.read_text().replace('"index": 1', '"index": "one"') + "\n")
    with pytest.raises(ConfigError, match=r"points.jsonl, line 2: unreadable"):
        record.finished(points, 1, {})


def test_a_sweep_without_its_extra_is_an_error_naming_the_extra(monkeypatch, capsys):
    import sys

    from foxhunt import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # as where foxhunt[sweep] is not installed
    assert cli.main(["sweep", "--journal", "x", "--grid", "strategy.ema_cross.fast=5"]) == 2
    assert "pip install 'foxhunt[sweep]'" in capsys.readouterr().err


def test_a_sweeps_report_draws_its_parameters_against_the_metric(tmp_path):
    from foxhunt.runtime import report

    points = [{"index": i, "overrides": [f"strategy.ema_cross.fast={f}", f"strategy.ema_cross.slow={s}",
                                         'strategy.name="ema_cross"'],
               "metrics": {"sharpe": float(f * s), "pnl": 1.5, "orders": 3}, "error": ""}
              for i, (f, s) in enumerate([(5, 30), (5, 40), (10, 30), (10, 40)])]
    points.append({"index": 4, "overrides": ["strategy.ema_cross.fast=20", "strategy.ema_cross.slow=30",
                                             'strategy.name="ema_cross"'], "metrics": {}, "error": "boom"})
    out = tmp_path / "sweep.html"
    report.render_sweep(points, "sharpe", out, "a sweep")
    page = out.read_text()
    assert 'id="fig-parallel"' in page and 'id="fig-heatmap"' in page and "data-figures='2'" in page
    assert "strategy.ema_cross.slow" in page and "boom" in page and "strategy.name" not in page.split("<table")[1]


# --- foxhunt tune's space (training/tune.py) --------------------------------------------------------------


def test_a_tunes_space_is_ray_domains_over_the_models_section_and_trials_become_set_overrides():
    import numpy as np
    from ray.tune.search.sample import Categorical, Float, Integer

    from foxhunt.training import tune

    space = tune.space(["train.learning_rate=log:0.0001:0.01", "train.window=int:8:32",
                        "train.weight_decay=float:0:0.1", "train.models.mlp.hidden=choice:16|32"], ["train"])
    assert [(d.key, d.kind, d.values) for d in space] == [
        ("train.learning_rate", "log", (0.0001, 0.01)), ("train.window", "int", (8, 32)),
        ("train.weight_decay", "float", (0.0, 0.1)), ("train.models.mlp.hidden", "choice", (16, 32))]
    domains = [d.domain() for d in space]
    assert isinstance(domains[0], Float) and isinstance(domains[1], Integer) and isinstance(domains[3], Categorical)
    assert (domains[1].lower, domains[1].upper) == (8, 33)  # Ray's upper bound is exclusive; ours is not
    assert [d.ends() for d in space] == [[0.0001, 0.01], [8, 32], [0.0, 0.1], [16, 32]]
    trial = {"train.learning_rate": np.float64(0.002), "train.window": np.int64(12), "train.models.mlp.hidden": 32}
    assert tune.overrides(trial) == ("train.learning_rate=0.002", "train.window=12", "train.models.mlp.hidden=32")


@pytest.mark.parametrize(("specs", "message"), [
    ([], "needs a space"),
    (["train.learning_rate=log:0:0.01"], "LO > 0"),
    (["train.window=int:8:8"], "LO < HI"),
    (["train.window=gauss:0:1"], "expected KEY=float"),
    (["train.models.mlp.hidden=choice:16"], "choice:A|B"),
    (["agents.ppo.learning_rate=log:0.001:0.01"], "tunes train.* settings, not agents.ppo.learning_rate"),
    (["train.window=int:8:16", "train.window=int:4:8"], "train.window has a space already"),
])
def test_a_tunes_space_that_is_not_one_is_an_error_naming_it(specs, message):
    from foxhunt.training import tune

    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("*", r"\*").replace("|", r"\|")):
        tune.space(specs, ["train"])


def test_the_best_trial_is_a_finished_one_with_the_best_metric_the_first_of_equals():
    from foxhunt.training.tune import TrialOutcome, best

    outcomes = [TrialOutcome("1", (), {"validation_loss": 0.5}, "stopped"),
                TrialOutcome("2", (), {"validation_loss": 0.7}, "finished"),
                TrialOutcome("3", (), {}, "failed", "boom"),
                TrialOutcome("4", (), {"validation_loss": float("nan")}, "finished"),
                TrialOutcome("5", (), {"validation_loss": 0.6}, "finished"),
                TrialOutcome("6", (), {"validation_loss": 0.6}, "finished")]
    assert best(outcomes, "validation_loss", "min").trial == "5"  # not 1: ASHA stopped it before it finished
    assert best(outcomes, "validation_loss", "max").trial == "2"
    assert best(outcomes, "pnl", "max") is None


def test_a_tune_without_its_extra_is_an_error_naming_the_extra(monkeypatch, capsys):
    import sys

    from foxhunt import cli

    monkeypatch.setitem(sys.modules, "optuna", None)  # as where foxhunt[sweep] is not installed
    assert cli.main(["tune", "mlp", "--journal", "x", "--space", "train.window=int:8:16"]) == 2
    assert "pip install 'foxhunt[sweep]'" in capsys.readouterr().err


def test_a_tunes_metric_keeps_the_models_own_sense_and_a_sign_asks_for_the_least():
    from foxhunt.training.tune import objective

    assert objective(None, "validation_loss", "min") == ("validation_loss", "min")
    assert objective("validation_loss", "validation_loss", "min") == ("validation_loss", "min")  # not the most loss
    assert objective("test_h1_ic", "validation_loss", "min") == ("test_h1_ic", "max")
    assert objective("-held_out_max_drawdown_bp", "held_out_pnl_bp", "max") == ("held_out_max_drawdown_bp", "min")


def test_a_sweep_runs_in_one_process_at_a_time(tmp_path):
    record = sweep.Record(tmp_path / "s")
    record.create([("x=1",)], 1, {})
    with record.held(), pytest.raises(ConfigError, match="'s' is being run by another process"), record.held():
        pass  # flock is per open file: a second open, as another process's, is refused
    with record.held():
        pass  # and free again once the first is done
