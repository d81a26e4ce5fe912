"""`foxhunt sweep`: many backtests of one or more journals, each with its own `--set` overrides, on Ray.

A sweep's points are decided here, before Ray sees them: a grid (`--grid KEY=V1,V2,...`, every combination,
in the order given) or seeded random draws (`--random KEY=int:LO:HI`, `float:LO:HI` or `choice:A|B|C`,
`--samples` of them from `numpy.random.default_rng(seed)`), so the same command and seed make the same
points in the same order whatever runs them. Each point is a Ray task (one CPU each by default, `--workers`
at a time): Ray places it, runs a task again whose worker died, and reports a task that raised with its
error without stopping the others. Every finished point goes into the sweep's record in its directory as
it comes in (`Record`), and `--resume` goes on from there without running a finished point again.
(`foxhunt tune`, training/tune.py, is the search that needs Ray Tune: a sampler, a scheduler, checkpoints.)

The point itself is a `Trainable` (a backtest here, bootstrap.BacktestTrainable): a picklable callable from
a point's overrides and a seed to its metrics. This module knows Ray and the points, not the journals.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import math
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from foxhunt.errors import ConfigError, FoxhuntError

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


def _point(trainable: Trainable, overrides: Overrides, seed: int) -> dict[str, Any]:
    """What a Ray task runs for one point: its metrics, or the error it raised (a point's failure is its
    outcome, not run again; a backtest reports nothing on the way and keeps no checkpoint: a point whose
    worker died runs again whole)."""
    try:
        with tempfile.TemporaryDirectory(prefix="foxhunt-point-") as workdir:
            metrics = trainable(overrides, seed, _unheard, Path(workdir))
        return {"metrics": metrics, "error": ""}
    except Exception as e:  # noqa: BLE001 - a point's failure is its outcome; the sweep goes on
        return {"metrics": {}, "error": f"{type(e).__name__}: {e}"}


def _unheard(metrics: dict[str, Any], checkpoint: bool = False) -> None:
    """A sweep keeps a point's final metrics only."""


# Ray's settings for a Ray started here, as the variables Ray reads its settings from (src/ray/common/
# ray_config_def.h); one that the environment already sets is left as it is. Measured in docs/benchmarks.md ("Sweeps
# on Ray", session 26), on 2 cores:
# - The raylet connects to the object store it has just started in a thread of its own; when the store's socket is
#   not there yet, it tries again after raylet_client_connect_timeout_milliseconds (Ray's default: 1,000 ms, 10
#   attempts). Five starts in ten here lost that race, and a whole second. Ten times the attempts at a tenth of the
#   interval keep the same ten seconds' patience without the lost second.
# - Worker processes start with the raylet, not when this process has connected (Ray's driver waits a second for
#   the raylet meanwhile, in steps of a second), and import the trainable's module before they take work
#   (`preload`): the first points start 0.2 s after they are sent, not 0.5 s.
RAY_START = {
    "RAY_raylet_client_connect_timeout_milliseconds": "100",
    "RAY_raylet_client_num_connect_attempts": "100",
    "RAY_enable_worker_prestart": "1",
}


# The object store of a Ray that a sweep starts here. A sweep passes its points, its trainable and its results through
# it, kilobytes; Ray's default is 30% of the machine's memory, and every one of its processes maps all of it. Measured
# on this 2-core machine (docs/benchmarks.md, "Sweeps on Ray", session 27): a process that maps 4 GB or more, even
# untouched, runs a backtest 8 to 10% slower (user time, the same work); one that maps 2 GB or less does not. With
# Ray's default (7.5 GB here) that was the whole of the slowdown of a point in a Ray worker.
OBJECT_STORE_BYTES = 512 * 2**20


def start_ray(workers: int, address: str | None = None, cpus_per_trial: float = 1.0,
              gpus_per_trial: float = 0.0, preload: Sequence[str] = (), object_store_bytes: int | None = None) -> None:
    """Ray in this process, once: joined to the cluster at `address`, or started here with `workers` CPUs
    (without its dashboard, its workers' logs kept out of this command's output, its settings `RAY_START`, its
    workers importing the modules `preload` before their first task, and an object store of `object_store_bytes`,
    Ray's default where None). Started here, a ConfigError where one trial's CPUs or GPU share is more than this
    machine's Ray has: nothing could run (Ray would wait for ever). A cluster joined may grow (an autoscaler adds
    the nodes asked for), so it is not checked."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # `tune`: no TensorBoard or CSV files per trial
    import ray

    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        if address is not None:
            ray.init(address=address, **options)
        else:
            settings = RAY_START | ({"RAY_preload_python_modules": ",".join(preload)} if preload else {})
            with _environment(settings):  # Ray's processes started meanwhile inherit them, and their workers
                ray.init(num_cpus=max(1, workers), object_store_memory=object_store_bytes, **options)
    if address is None:
        have = ray.cluster_resources()
        asked = (("--cpus-per-trial", cpus_per_trial, "CPU"), ("--gpus-per-trial", gpus_per_trial, "GPU"))
        for option, need, kind in asked:
            if need > have.get(kind, 0):
                raise ConfigError(f"{option} {need:g}: Ray on this machine has {have.get(kind, 0):g} {kind} (with"
                                  f" --workers {workers}), so no trial could start; ask for less, or join a"
                                  " cluster that has them (--address)")


@contextmanager
def _environment(settings: dict[str, str]) -> Iterator[None]:
    """The variables of `settings` that the environment does not set, set while the block runs."""
    added = {k: v for k, v in settings.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class Interrupted(FoxhuntError):
    """A sweep stopped by Ctrl-C; what finished is kept in its record, and `--resume` runs the rest."""


class Record:
    """A sweep's record, `points.jsonl` in its directory: the first line its points and seed, then a line
    for each finished point (its index, metrics and error), appended and synced to disk as the point comes
    in, so that a sweep stopped any way (Ctrl-C, a crash, the machine) loses no finished point. A last line
    cut short by a crash is ignored (that point runs again); any other line that does not read is an error
    naming it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "points.jsonl"

    def create(self, points: Sequence[Overrides], seed: int, context: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True)
        self._write({"points": [list(p) for p in points], "seed": seed, "context": context})

    def finished(self, points: Sequence[Overrides], seed: int, context: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """The finished points' outcomes by index, after checking that the record is of these points, this seed
        and this context (what else decides a point's outcome: for a backtest, its journals and `--set`)."""
        lines = self.path.read_text().splitlines()
        head = self._line(lines, 0)
        if head.get("points") != [list(p) for p in points] or head.get("seed") != seed:
            raise ConfigError(f"{self.path}: the sweep was started with other points or another --seed; resume it"
                              " with the same --grid (or --random, --samples and --seed)")
        if head.get("context") != as_kept(context):
            raise ConfigError(f"{self.path}: the sweep was started with {head.get('context')}, not {context}: resume"
                              " it as it was started")
        done: dict[int, dict[str, Any]] = {}
        for number in range(1, len(lines)):
            try:
                entry = self._line(lines, number)
            except ConfigError:
                if number == len(lines) - 1:
                    break  # cut short by a crash while it was written: that point runs again
                raise
            done[int(entry["index"])] = entry
        return done

    @contextmanager
    def held(self) -> Iterator[None]:
        """The record for this process alone while it runs the sweep: a second process running the same
        sweep (a resume started twice) would run its points again beside it."""
        with (self.path.parent / "lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(f"sweep {self.path.parent.name!r} is being run by another process (its lock:"
                                  f" {lock.name})") from None
            yield

    def add(self, index: int, outcome: dict[str, Any]) -> None:
        self._write({"index": index, **outcome})

    def _line(self, lines: list[str], number: int) -> dict[str, Any]:
        try:
            entry = json.loads(lines[number])
            if not isinstance(entry, dict) or (number and not isinstance(entry.get("index"), int)):
                raise ValueError("not a point's outcome")
            return entry
        except (ValueError, IndexError) as e:
            raise ConfigError(f"{self.path}, line {number + 1}: unreadable ({e}); the sweep's record is damaged"
                              ) from None

    def _write(self, entry: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(entry, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())


def run(trainable: Trainable, points: Sequence[Overrides], seed: int, directory: Path, name: str,
        workers: int, address: str | None = None, resume: bool = False, cpus_per_trial: float = 1.0,
        gpus_per_trial: float = 0.0, retries: int = 2, progress: Callable[[int, int, int], None] | None = None,
        context: dict[str, Any] | None = None) -> list[Outcome]:
    """The points as Ray tasks, one a point, `workers` at a time (with no `address`, Ray starts inside this
    process on this machine with that many CPUs); their outcomes in the points' order. Point `i` runs with
    seed `seed + i`. A task whose worker process died runs again, `retries` times at most (Ray's
    `max_retries`); a point that raises is reported with its error. Every finished point goes into the
    sweep's record (`Record`, in `directory/name`) as it comes in; with `resume`, the points already there
    are taken as they are and only the others run. Ray's worker processes run one task after another, so
    what a trainable keeps in its process (the journals a backtest read) serves the next point.
    `progress(done, failed, total)` hears of the points this call runs (`total`, those resumed left out)
    as each finishes. `context` (JSON): what else decides a point's outcome, kept in the record, which a
    resume must give the same."""
    path = directory / name
    record = Record(path)
    if resume:
        if not record.path.exists():
            raise ConfigError(f"--resume: no sweep to resume in {path}")
    elif path.exists():
        raise ConfigError(f"sweep {name!r} exists in {directory}: --resume it, or give another --name")
    start_ray(workers, address, cpus_per_trial, gpus_per_trial, preload=(type(trainable).__module__,),
              object_store_bytes=OBJECT_STORE_BYTES)
    if not resume:
        record.create(points, seed, context or {})
    with record.held():
        finished = record.finished(points, seed, context or {}) if resume else {}
        return _run(trainable, points, seed, name, workers, cpus_per_trial, gpus_per_trial, retries, progress,
                    record, finished)


def _run(trainable: Trainable, points: Sequence[Overrides], seed: int, name: str, workers: int,
         cpus_per_trial: float, gpus_per_trial: float, retries: int,
         progress: Callable[[int, int, int], None] | None, record: Record,
         finished: dict[int, dict[str, Any]]) -> list[Outcome]:
    import ray

    outcomes = {i: Outcome(i, tuple(p)) for i, p in enumerate(points)}
    for i, entry in finished.items():
        outcomes[i].metrics, outcomes[i].error = entry["metrics"], entry["error"]
    waiting = deque(i for i in range(len(points)) if i not in finished)
    total, done, failed = len(waiting), 0, 0
    if progress is not None:
        progress(done, failed, total)
    task = ray.remote(_point).options(num_cpus=cpus_per_trial, num_gpus=gpus_per_trial, max_retries=retries)
    shared = ray.put(trainable)  # shipped to the object store once, not once a point
    running: dict[Any, int] = {}
    try:
        while waiting or running:
            while waiting and len(running) < max(1, workers):
                i = waiting.popleft()
                running[task.remote(shared, points[i], seed + i)] = i
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                i = running.pop(ref)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as e:  # its worker died more than `retries` times, or Ray lost it
                    outcome = {"metrics": {}, "error": first_line(e)}
                outcomes[i].metrics, outcomes[i].error = outcome["metrics"], outcome["error"]
                record.add(i, outcome)
                done, failed = done + 1, failed + bool(outcome["error"])
                if progress is not None:
                    progress(done, failed, total)
    except KeyboardInterrupt:
        raise Interrupted(f"sweep {name!r} interrupted with {len(finished) + done} of {len(points)} points done (kept in"
                          f" {record.path.parent}):"
                          f" the same command with --name {name} --resume runs the rest") from None
    finally:
        for ref in running:
            ray.cancel(ref, force=True)
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


def as_kept(context: dict[str, Any]) -> Any:
    """`context` as it reads back from the JSON it is kept in (what JSON has no form for, as its text)."""
    return json.loads(json.dumps(context, default=str))


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
