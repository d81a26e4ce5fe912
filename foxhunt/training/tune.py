"""`foxhunt tune MODEL`: a hyperparameter search for a forecaster or a trading agent, on Ray Tune.

The search space is written as `--space KEY=KIND:...` over the model's section of the configuration
(`train.` for a forecaster, `agents.` for an agent): `float:LO:HI`, `log:LO:HI` (uniform in the logarithm),
`int:LO:HI` (inclusive) or `choice:A|B|C`. Optuna's TPE sampler, seeded with `--seed`, proposes each
trial's values (its first ten are seeded random draws, then it models which values did well); ASHA (the
asynchronous successive halving of Li et al., 2018, arXiv:1810.05934) stops a trial whose metric, at a
rung of 1, 3, 9, ... evaluations, falls behind the best third of the trials that reached that rung. A trial
is a `Trainable` (training/sweep.py) that trains one model with the trial's values as `--set` overrides and
the search's seed, reports its metric at each evaluation with a checkpoint, and leaves the trained model in
a store of its own in the trial's directory; the best finished trial's model goes to the configured store,
its manifest naming the search (`training.search`).

A trial whose worker dies is started again from its last checkpoint (`FailureConfig`), and ends with the
weights it would have had (the trainers resume exactly, training/trainer.py, training/rl/segments.py); a
trial that fails is reported with its error and the others go on; `--resume` goes on with an interrupted
search from its directory (`Tuner.restore`, the sampler's state included).

What is reproducible: each trial's weights follow from its values and the seed, wherever it runs. The
values tried and the trials stopped follow the seed alone with `--workers 1`; with more, the sampler and
ASHA hear results in the order trials finish, which the machine's timing decides.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from foxhunt.errors import ConfigError, ModelError
from foxhunt.models.artifact import MANIFEST, encode_manifest, read_manifest
from foxhunt.ports import ModelStore
from foxhunt.training.sweep import (
    OBJECT_STORE_BYTES,
    Overrides,
    Trainable,
    as_kept,
    first_line,
    literal,
    restored,
    start_ray,
    toml_value,
)

REDUCTION_FACTOR = 3  # ASHA keeps the best third at each rung


@dataclass(frozen=True)
class Dimension:
    key: str  # a configuration key, as for --set
    kind: str  # float, log, int or choice
    values: tuple[Any, ...]  # (LO, HI) or the choices

    def domain(self) -> Any:
        from ray import tune

        if self.kind == "float":
            return tune.uniform(*self.values)
        if self.kind == "log":
            return tune.loguniform(*self.values)
        if self.kind == "int":
            return tune.randint(self.values[0], self.values[1] + 1)  # Ray's upper bound is exclusive
        return tune.choice(list(self.values))

    def ends(self) -> list[Any]:
        """The values at the space's edges: what is checked against the configuration before a search."""
        return list(self.values) if self.kind == "choice" else [self.values[0], self.values[-1]]


def space(specs: Sequence[str], sections: Sequence[str]) -> list[Dimension]:
    """`KEY=float:LO:HI`, `KEY=log:LO:HI`, `KEY=int:LO:HI` or `KEY=choice:A|B|C` each, its KEY in one of
    `sections` (ConfigError naming the one that is not a space)."""
    if not specs:
        raise ConfigError("a search needs a space: --space KEY=float:LO:HI, log:LO:HI, int:LO:HI or choice:A|B")
    out = []
    for spec in specs:
        key, sep, text = spec.partition("=")
        kind, _, rest = text.partition(":")
        key = key.strip()
        try:
            if not sep or not key:
                raise ValueError
            if kind in ("float", "log"):
                lo, hi = (float(x) for x in rest.split(":"))
                if not lo < hi or (kind == "log" and lo <= 0):
                    raise ValueError
                values: tuple[Any, ...] = (lo, hi)
            elif kind == "int":
                lo_i, hi_i = (int(x) for x in rest.split(":"))
                if not lo_i < hi_i:
                    raise ValueError
                values = (lo_i, hi_i)
            elif kind == "choice":
                values = tuple(literal(x) for x in rest.split("|") if x)
                if len(values) < 2:
                    raise ValueError
            else:
                raise ValueError
        except ValueError:
            raise ConfigError(f"--space {spec!r}: expected KEY=float:LO:HI, KEY=log:LO:HI (LO > 0), KEY=int:LO:HI"
                              " (LO < HI) or KEY=choice:A|B|...") from None
        if key.split(".")[0] not in sections:
            raise ConfigError(f"--space {spec!r}: this search tunes {' or '.join(f'{s}.*' for s in sections)}"
                              f" settings, not {key}")
        if key in {d.key for d in out}:
            raise ConfigError(f"--space {spec!r}: {key} has a space already")
        out.append(Dimension(key, kind, values))
    return out


SPACE_FILE = "foxhunt-space.json"  # in the search's directory: the --space it was started with
CONTEXT_FILE = "foxhunt-context.json"  # and what else decides its trials: model, data, --set, seed, size


def check_context(path: Path, context: dict[str, Any]) -> None:
    """For `--resume`: a ConfigError unless the search in `path` was started with this `context` (a resume
    with other data or settings would mix two searches' trials in one table). A search started before its
    context was kept (foxhunt before session 25) is not checked."""
    try:
        saved = json.loads((path / CONTEXT_FILE).read_text())
    except FileNotFoundError:
        return
    except (OSError, ValueError) as e:
        raise ConfigError(f"--resume: {path / CONTEXT_FILE} is unreadable ({e})") from None
    if saved != as_kept(context):
        raise ConfigError(f"--resume: the search in {path} was started with {saved}, not {context}: resume it as it"
                          " was started")


def saved_space(path: Path) -> list[Dimension]:
    """The space of the search in `path`, for `--resume` (which goes on with the search's own space)."""
    try:
        saved = json.loads((path / SPACE_FILE).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"--resume: no search to resume in {path} ({e})") from None
    return [Dimension(d["key"], d["kind"], tuple(d["values"])) for d in saved]


def overrides(values: dict[str, Any]) -> Overrides:
    """A trial's values as `--set` assignments, in the order of its keys."""
    return tuple(f"{key}={toml_value(v.item() if hasattr(v, 'item') else v)}" for key, v in values.items())


def objective(requested: str | None, default: str, default_mode: str) -> tuple[str, str]:
    """`--metric` as (name, max or min): the trainable's own metric in its own sense, when not given or
    named as it is; any other name the most of it, or the least with a leading `-`."""
    if requested is None or requested == default:
        return default, default_mode
    return (requested[1:], "min") if requested.startswith("-") else (requested, "max")


@dataclass
class TrialOutcome:
    """A trial's values, its last metrics, and how it ended: finished, stopped (by ASHA) or failed."""

    trial: str  # its number, from 1 in the order trials started
    overrides: Overrides
    metrics: dict[str, Any] = field(default_factory=dict)
    ended: str = "failed"
    error: str = ""
    path: str = ""  # its last checkpoint (a finished trial's holds its model), where it has one


def _trial(config: dict[str, Any], model: Trainable, seed: int) -> None:
    """What Ray runs for a trial: a working directory (from the trial's last checkpoint, if it has one),
    the trainable in it, and every report it makes with a checkpoint of that directory."""
    from ray import tune

    work = Path(tempfile.mkdtemp(prefix="foxhunt-trial-"))
    try:
        saved = tune.get_checkpoint()
        if saved is not None:
            with saved.as_directory() as path:
                shutil.copytree(path, work, dirs_exist_ok=True)

        def report(metrics: dict[str, float], checkpoint: bool = False) -> None:
            tune.report({**metrics, "done": False},
                        checkpoint=tune.Checkpoint.from_directory(str(work)) if checkpoint else None)

        final = model(overrides(config), seed, report, work)
        tune.report({**final, "done": True}, checkpoint=tune.Checkpoint.from_directory(str(work)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(trainable: Trainable, dimensions: Sequence[Dimension], trials: int, metric: str, mode: str, seed: int,
        directory: Path, name: str, workers: int, address: str | None = None, resume: bool = False,
        cpus_per_trial: float = 1.0, gpus_per_trial: float = 0.0, evaluations: int = 100, grace: int = 1,
        retries: int = 2, context: dict[str, Any] | None = None) -> list[TrialOutcome]:
    """`trials` trials, `workers` at a time, Optuna proposing their values and ASHA stopping the laggards on
    `metric` (`mode` max or min), each trial with `cpus_per_trial` CPUs and `gpus_per_trial` of a GPU (a
    fraction shares one); `evaluations`: the most reports a trial makes (ASHA's last rung). The outcomes in
    the order trials started."""
    import optuna
    from ray import cloudpickle, tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    # Ray's object store holds the trainable (tune.with_parameters puts it there, with the data a trial trains on)
    # beside Tune's own kilobytes: sized to that, not to Ray's default, whose mapping slows every trial
    # (sweep.OBJECT_STORE_BYTES says why; a tiny CPU training loop ran 6% slower beside it)
    pieces: list[Any] = []  # pickled as Ray pickles it: protocol 5, its arrays out of band (not copied)
    carried = len(cloudpickle.dumps(trainable, protocol=5, buffer_callback=pieces.append))
    store = OBJECT_STORE_BYTES + 2 * (carried + sum(piece.raw().nbytes for piece in pieces))
    start_ray(workers, address, cpus_per_trial, gpus_per_trial, object_store_bytes=store)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = directory / name
    trial = tune.with_resources(tune.with_parameters(_trial, model=trainable, seed=seed),
                                {"cpu": cpus_per_trial, "gpu": gpus_per_trial})
    tuner = restored(path, trial, resume, "search")
    if tuner is None:
        path.mkdir(parents=True)
        (path / SPACE_FILE).write_text(json.dumps([{"key": d.key, "kind": d.kind, "values": list(d.values)}
                                                   for d in dimensions]))
        (path / CONTEXT_FILE).write_text(json.dumps(context or {}, default=str))
        sampler = optuna.samplers.TPESampler(seed=seed)
        scheduler = ASHAScheduler(time_attr="training_iteration", max_t=max(evaluations, grace), grace_period=grace,
                                  reduction_factor=REDUCTION_FACTOR)
        tuner = tune.Tuner(
            trial, param_space={d.key: d.domain() for d in dimensions},
            tune_config=tune.TuneConfig(metric=metric, mode=mode, search_alg=OptunaSearch(sampler=sampler),
                                        scheduler=scheduler, num_samples=trials, max_concurrent_trials=max(1, workers),
                                        reuse_actors=True),
            run_config=tune.RunConfig(name=name, storage_path=str(directory), verbose=0,
                                      failure_config=tune.FailureConfig(max_failures=retries),
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=1)))
    results = tuner.fit()
    outcomes = []
    for result in results:
        values = {d.key: result.config[d.key] for d in dimensions if d.key in result.config}
        number = re.match(r"_?\w+?_[0-9a-f]{8}_([0-9]+)_", Path(result.path).name)  # _trial_ID_N_VALUES_TIME
        outcome = TrialOutcome(number.group(1) if number else Path(result.path).name, overrides(values),
                               dict(result.metrics or {}))
        if result.checkpoint is not None:
            outcome.path = result.checkpoint.path
        if result.error is not None:
            outcome.error = first_line(result.error)
        elif outcome.metrics.get("done"):
            outcome.ended = "finished"
        elif outcome.metrics:
            outcome.ended = "stopped"
        else:
            outcome.error = "the trial reported nothing"
        outcomes.append(outcome)
    return sorted(outcomes, key=lambda o: (len(o.trial), o.trial))  # by number, as they started


def best(outcomes: Sequence[TrialOutcome], metric: str, mode: str) -> TrialOutcome | None:
    """The finished trial with the best `metric` (the first of equals); None if none finished with it."""
    scored = [o for o in outcomes if o.ended == "finished" and isinstance(o.metrics.get(metric), (int, float))
              and math.isfinite(o.metrics[metric])]
    if not scored:
        return None
    sign = 1 if mode == "max" else -1
    return max(enumerate(scored), key=lambda p: (sign * p[1].metrics[metric], -p[0]))[1]


def record(name: str, dimensions: Sequence[Dimension], outcomes: Sequence[TrialOutcome], chosen: TrialOutcome,
           metric: str, mode: str, seed: int, workers: int) -> dict[str, Any]:
    """What the chosen model's manifest says of the search that chose it."""
    import optuna
    import ray

    ended = [o.ended for o in outcomes]
    return {
        "name": name, "chosen_trial": chosen.trial, "overrides": list(chosen.overrides), "metric": metric,
        "mode": mode, "value": chosen.metrics.get(metric), "seed": seed, "workers": workers,
        "space": [f"{d.key}={d.kind}:{':'.join(str(v) for v in d.values)}" if d.kind != "choice"
                  else f"{d.key}=choice:{'|'.join(str(v) for v in d.values)}" for d in dimensions],
        "trials": len(outcomes), "finished": ended.count("finished"), "stopped": ended.count("stopped"),
        "failed": ended.count("failed"),
        "sampler": f"optuna {optuna.__version__} TPESampler(seed={seed})",
        "scheduler": f"ASHA (reduction factor {REDUCTION_FACTOR})", "ray": ray.__version__,
        "results": json.loads(json.dumps([{"trial": o.trial, "overrides": list(o.overrides), "ended": o.ended,
                                           metric: o.metrics.get(metric)} for o in outcomes], default=str)),
    }


def keep(chosen: TrialOutcome, search: dict[str, Any], models: ModelStore) -> tuple[str, bool]:
    """The chosen trial's model into `models`, its manifest's `training.search` saying what chose it; its id,
    and False where `models` had these weights already (their manifest then stays the earlier one's)."""
    from foxhunt.training.trainables import trained

    where = f"trial {chosen.trial}'s last checkpoint ({chosen.path})"
    made = trained(Path(chosen.path)) if chosen.path else None
    ids = made.ids() if made is not None else []
    if made is None or len(ids) != 1:
        raise ModelError(f"{where} should hold the trial's model, and holds {len(ids)}")
    files = made.get(ids[0])
    manifest = read_manifest(files, where)
    named = msgspec.structs.replace(manifest, training=manifest.training | {"search": search})
    return ids[0], models.put(ids[0], files | {MANIFEST: encode_manifest(named)})
