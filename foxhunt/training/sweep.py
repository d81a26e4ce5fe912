"""`foxhunt sweep`: many backtests of one or more journals, each with its own `--set` overrides, on Ray Tune.

A sweep's points are decided here, before Ray sees them: a grid (`--grid KEY=V1,V2,...`, every combination,
in the order given) or seeded random draws (`--random KEY=int:LO:HI`, `float:LO:HI` or `choice:A|B|C`,
`--samples` of them from `numpy.random.default_rng(seed)`), so the same command and seed make the same
points in the same order whatever runs them. Ray Tune runs each point as a trial (one CPU each by default,
`--workers` at a time), keeps its result in the sweep's directory, retries a trial whose worker died
(`FailureConfig`), reports a trial that fails with its error without stopping the others, and `--resume`
goes on from that directory without running a finished point again (`Tuner.restore`).

The trial itself is a `Trainable` (a backtest here, bootstrap.BacktestTrainable): a picklable callable from
a point's overrides and a seed to its metrics. This module knows Ray and the points, not the journals.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from foxhunt.errors import ConfigError

Overrides = tuple[str, ...]  # `--set` assignments, as `key=value` with the value written as TOML


class Report(Protocol):
    def __call__(self, metrics: dict[str, Any], checkpoint: bool = False) -> None: ...


class Trainable(Protocol):
    """One point of a search: its overrides and a seed in, its metrics out (numbers, and what it made: a
    model's id, where it made one). `report` hears intermediate metrics (an evaluation's; a backtest has
    none), with `checkpoint=True` when `workdir` holds a state to resume from, which a search keeps. A run
    keeps its files in `workdir`: its checkpoints (a run that finds one there resumes from it) and what it
    made (a model, in a store there). It runs in a Ray worker process, so it must pickle."""

    def __call__(self, overrides: Overrides, seed: int, report: Report, workdir: Path) -> dict[str, Any]: ...


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string for what settings hold


def literal(text: str) -> Any:
    """A grid value as written: an integer, a float, true/false, or text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def grid(specs: Sequence[str]) -> list[Overrides]:
    """`KEY=V1,V2,...` each: every combination, the first key slowest."""
    axes = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key.strip() or not items:
            raise ConfigError(f"--grid {spec!r}: expected KEY=V1,V2,... as in strategy.ema_cross.fast=5,10,20")
        axes.append([f"{key.strip()}={toml_value(literal(v))}" for v in items])
    return [tuple(point) for point in itertools.product(*axes)]


def random(specs: Sequence[str], samples: int, seed: int) -> list[Overrides]:
    """`KEY=int:LO:HI` (inclusive), `KEY=float:LO:HI` or `KEY=choice:A|B|C` each: `samples` draws, seeded."""
    if samples < 1:
        raise ConfigError("--samples: a random sweep needs at least one sample")
    rng = np.random.default_rng(seed)
    draws: list[list[str]] = [[] for _ in range(samples)]
    for spec in specs:
        key, sep, space = spec.partition("=")
        kind, _, rest = space.partition(":")
        key = key.strip()
        try:
            if kind == "int":
                lo, hi = (int(x) for x in rest.split(":"))
                values = [int(v) for v in rng.integers(lo, hi + 1, samples)]
            elif kind == "float":
                lo_f, hi_f = (float(x) for x in rest.split(":"))
                values = [float(v) for v in rng.uniform(lo_f, hi_f, samples)]
            elif kind == "choice":
                options = [literal(x) for x in rest.split("|") if x]
                values = [options[i] for i in rng.integers(0, len(options), samples)]
            else:
                raise ValueError
            if not sep or not key:
                raise ValueError
        except ValueError:
            raise ConfigError(f"--random {spec!r}: expected KEY=int:LO:HI, KEY=float:LO:HI or KEY=choice:A|B|C"
                              ) from None
        for draw, value in zip(draws, values, strict=True):
            draw.append(f"{key}={toml_value(value)}")
    return [tuple(d) for d in draws]


@dataclass
class Outcome:
    """A point's result: its metrics, or the error that ended it."""

    index: int
    overrides: Overrides
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _trial(config: dict[str, Any], point_of: Trainable) -> None:
    """What Ray runs for a batch of points (a function trainable): each point through the trainable in turn,
    a point that raises recorded with its error; the batch's outcomes reported once, as JSON."""
    from ray import tune

    def report(partial: dict[str, Any], checkpoint: bool = False) -> None:
        tune.report({**partial, "done": False})  # a backtest keeps no checkpoint: a point runs again whole

    done = []
    for point in config["batch"]:
        try:
            with tempfile.TemporaryDirectory(prefix="foxhunt-point-") as workdir:
                metrics = point_of(tuple(point["overrides"]), int(point["seed"]), report, Path(workdir))
            done.append({"index": point["index"], "metrics": metrics, "error": ""})
        except Exception as e:  # noqa: BLE001 - a point's failure is its outcome; the batch goes on
            done.append({"index": point["index"], "metrics": {}, "error": f"{type(e).__name__}: {e}"})
    tune.report({"outcomes": json.dumps(done, default=str), "done": True})


def start_ray(workers: int, address: str | None = None) -> None:
    """Ray in this process, once: joined to the cluster at `address`, or started here with `workers` CPUs
    (without its dashboard, its workers' logs kept out of this command's output)."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no TensorBoard or CSV files per trial
    import ray

    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        ray.init(address=address, **({} if address else {"num_cpus": max(1, workers)}), **options)


def batches(count: int, workers: int, per_trial: int | None = None) -> list[range]:
    """The points' indices cut into trials: `per_trial` each, or by default so that each worker runs
    about four trials (enough to balance the load, few enough that Tune's cost of a trial, about a
    worker-second here, is spread over several points)."""
    size = per_trial or max(1, count // (4 * max(1, workers)))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def run(trainable: Trainable, points: Sequence[Overrides], seed: int, directory: Path, name: str,
        workers: int, address: str | None = None, resume: bool = False, cpus_per_trial: float = 1.0,
        gpus_per_trial: float = 0.0, retries: int = 2, per_trial: int | None = None) -> list[Outcome]:
    """The points through Ray Tune, in trials of a few points (`batches`), `workers` trials at a time (with
    no `address`, Ray starts inside this process on this machine with that many CPUs); their outcomes in
    the points' order. A worker process runs one trial after another (`reuse_actors`), so what a trainable
    keeps in its process (the journals a backtest read) serves the next point."""
    from ray import tune

    start_ray(workers, address)
    path = directory / name
    trial = tune.with_resources(tune.with_parameters(_trial, point_of=trainable),
                                {"cpu": cpus_per_trial, "gpu": gpus_per_trial})
    tuner = restored(path, trial, resume, "sweep")
    if tuner is None:
        space = {"batch": tune.grid_search([[{"index": i, "overrides": list(points[i]), "seed": seed + i}
                                             for i in batch] for batch in batches(len(points), workers, per_trial)])}
        tuner = tune.Tuner(trial, param_space=space,
                           tune_config=tune.TuneConfig(max_concurrent_trials=max(1, workers), reuse_actors=True),
                           run_config=tune.RunConfig(name=name, storage_path=str(directory), verbose=0,
                                                     failure_config=tune.FailureConfig(max_failures=retries)))
    grid_results = tuner.fit()
    outcomes = {i: Outcome(i, tuple(p)) for i, p in enumerate(points)}
    for result in grid_results:
        indices = [int(point["index"]) for point in result.config["batch"]]
        if result.error is None and result.metrics and result.metrics.get("done"):
            for done in json.loads(result.metrics["outcomes"]):
                outcomes[done["index"]].metrics, outcomes[done["index"]].error = done["metrics"], done["error"]
            continue
        why = first_line(result.error) if result.error is not None else "the trial reported no result"
        for index in indices:
            outcomes[index].error = why
    return [outcomes[i] for i in sorted(outcomes)]


def restored(path: Path, trial: Any, resume: bool, what: str) -> Any:
    """With `resume`, the Tune experiment in `path` restored to go on (its finished trials kept, those that
    failed run again), or a ConfigError if there is none; without, None, or a ConfigError if `path` holds
    one already. `what`: the sweep or search, as the error names it."""
    from ray import tune

    if resume:
        if not tune.Tuner.can_restore(str(path)):
            raise ConfigError(f"--resume: no {what} to resume in {path}")
        return tune.Tuner.restore(str(path), trainable=trial, resume_errored=True)
    if path.exists():
        raise ConfigError(f"{what} {path.name!r} exists in {path.parent}: --resume it, or give another --name")
    return None


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    cause = [line for line in text if "Error" in line or "error" in line]
    return (cause[-1] if cause else text[-1] if text else type(error).__name__).strip()


def best(outcomes: Sequence[Outcome], metric: str, mode: str = "max") -> Outcome | None:
    """The point with the best value of `metric` (the first of equals); None if none has it."""
    scored = [o for o in outcomes if not o.error and isinstance(o.metrics.get(metric), (int, float))
              and not math.isnan(o.metrics[metric])]
    if not scored:
        return None
    sign = 1 if mode == "max" else -1
    return max(scored, key=lambda o: (sign * o.metrics[metric], -o.index))
