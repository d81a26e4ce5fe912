"""The scoring source: market data in, model scores out, as inputs on the bus like a venue's reports.

Live (`ScoringService`): the trading loop hands it every market data input it has journaled (`observe`,
a few microseconds on the loop); it keeps each symbol's feature rows (core/features/windows.py) and marks
the symbol's newest window as wanted. Its own task takes the wanted windows, up to the batch at a time, and
has every model score them in one worker thread (ports.ModelRunner: a CUDA graph on a GPU, eagerly on the
CPU), so the event loop never waits on a device; each forecast becomes a `ModelScored` input, published to
the bus. A symbol whose window changes while a call is in flight is scored again at its newest window
(scores are made of the newest data, never queued behind stale ones).

A model that cannot answer (missing or corrupted in the store, raising, out of memory, slower than
`deadline_ms`) becomes a `ModelFailed` input: trading goes to REDUCING in the kernel, the operator is told
in the log and by `models` on the admin socket, and the model is not called again until an operator's
`resume` loads it afresh. Nothing crashes and nothing loops.

Replay (`Recomputer`): the same windows, rebuilt from the journal's market data, and the same models from
the store, to recompute what a journal's scores said (`replay --verify`) or to score its windows with other
models (`replay --rescore`).
"""

from __future__ import annotations

import asyncio
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec
import numpy as np
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.config import ScoringConfig, TradingConfig
from foxhunt.core.features import FeatureSpec, FeatureWindows
from foxhunt.errors import ModelError, VerificationFailed
from foxhunt.messages.base import Input, nanos
from foxhunt.messages.market import MARKET_DATA_TYPES, MarketData
from foxhunt.messages.scores import LoadedModel, ModelFailed, ModelScored, ModelsLoaded
from foxhunt.messages.system import RunStarted
from foxhunt.ports import Clock, ModelRunner

if TYPE_CHECKING:
    from foxhunt.core.kernel import Kernel
    from foxhunt.runtime.policies import PolicyCheck

log = structlog.get_logger("foxhunt.scoring")

LATENCIES_KEPT = 10_000  # per model, for the percentiles `models` shows
JOIN_SECONDS = 5.0  # how long a stopping scoring source waits for the call in its thread to end


def scored(model: LoadedModel, symbol: str, as_of: int, ts_event: int, ts_init: int, window: np.ndarray,
           forecast: np.ndarray, latency_ns: int, digest: Callable[[np.ndarray], str]) -> ModelScored:
    """The event of one row's forecast: the outputs as Python floats (exactly the float32 values)."""
    return ModelScored(
        ts_event=ts_event, ts_init=ts_init, model_id=model.model_id, parameter_sha256=model.parameter_sha256,
        symbol=symbol, as_of=as_of, input_digest=digest(window), horizons=list(model.horizons),
        quantiles=list(model.quantiles), outputs=forecast.reshape(-1).tolist(), latency_ns=latency_ns,
    )


def timed(call: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """`call(*args)` and the nanoseconds it took, timed in the thread that makes it."""
    started = time.perf_counter_ns()
    out = call(*args)
    return out, time.perf_counter_ns() - started


def _check_together(models: list[LoadedModel]) -> dict[str, str]:
    """The models that cannot be combined with the first (another set of quantiles), and why."""
    if not models:
        return {}
    first = models[0]
    return {m.model_id: f"forecasts quantiles {m.quantiles}, model {first.model_id} {first.quantiles}"
            for m in models[1:] if m.quantiles != first.quantiles}


class Worker:
    """The one thread that makes every call to the model runner, in the order asked (so a model's buffers,
    its CUDA graph and the device are only ever used by one call at a time), and hands each answer back
    to the event loop with `call_soon_threadsafe`, its deadline a timer of the loop's. A round trip costs
    about 25 µs where `anyio.to_thread.run_sync` with a cancel scope costs about 80 (bench/thread_hop.py,
    docs/benchmarks.md): it is on the path of every score. The daemon runs anyio on asyncio (uvloop), whose
    loop this answers through."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future, asyncio.AbstractEventLoop] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None

    async def call(self, fn: Callable[[], Any], seconds: float) -> Any:
        """`fn()` in the thread; after `seconds` it is abandoned (the thread may still be in it) and
        TimeoutError is raised. What `fn` raises is raised here."""
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="foxhunt-scoring", daemon=True)
            self._thread.start()
        answer = loop.create_future()
        deadline = loop.call_later(seconds, _expire, answer)  # a timer, not a cancel scope: 30 µs less a call
        self._queue.put((fn, answer, loop))
        try:
            return await answer
        finally:
            deadline.cancel()

    def _serve(self) -> None:
        while (job := self._queue.get()) is not None:
            fn, answer, loop = job
            try:
                result, failed = fn(), None
            except BaseException as e:  # noqa: BLE001 - handed to the caller, which decides
                result, failed = None, e
            loop.call_soon_threadsafe(_settle, answer, result, failed)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        """The thread ends once the calls asked before are made, and is waited for (at most
        JOIN_SECONDS): a process that exits while torch runs in another thread is aborted by the C++
        runtime ("terminate called without an active exception", seen when a stop came mid-call)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(JOIN_SECONDS)
            self._thread = None


def _expire(answer: asyncio.Future) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())


def _settle(answer: asyncio.Future, result: Any, failed: BaseException | None) -> None:
    if answer.done():  # abandoned: its deadline passed, or the task waiting for it was cancelled
        return
    if failed is not None:
        answer.set_exception(failed)
    else:
        answer.set_result(result)


class Stats:
    """A served model's calls, latencies (the last LATENCIES_KEPT) and failures, for `models`."""

    def __init__(self) -> None:
        self.latencies: deque[int] = deque(maxlen=LATENCIES_KEPT)
        self.calls = 0
        self.failures = 0
        self.last_failure = ""

    def summary(self) -> dict[str, Any]:
        lat = np.array(self.latencies, dtype=np.float64) / 1e3
        pct = {f"p{p}": round(float(np.percentile(lat, p)), 1) for p in (50, 99, 99.9)} if lat.size else {}
        return {"calls": self.calls, "latency_us": pct, "failures": self.failures, "last_failure": self.last_failure}


class ModelSource(Protocol):
    """What the daemon serves a source of model inputs by: the scoring source (ScoringService) and the
    policy source (runtime/policies.py, PolicyService). `start` loads (the daemon submits what it returns
    before trading starts), `observe` is the trading loop's hook for every market data input, right after
    the kernel took it, `run` the source's task, `busy` whether inputs of it are still to come, `failed`
    the models not serving and why, `request_reload` an operator's resume, `status` the admin socket's
    `models`."""

    failed: dict[str, str]

    @property
    def busy(self) -> bool: ...

    async def start(self) -> list[Input]: ...

    def observe(self, seq: int, msg: MarketData) -> None: ...

    async def run(self, publisher: MemoryObjectSendStream[Input]) -> None: ...

    def request_reload(self) -> None: ...

    def status(self) -> dict[str, Any]: ...


class SourceTask:
    """The task of a source of model inputs (the scoring source here, the policy source in policies.py):
    woken by the loop's hook, it loads again what failed where an operator asked (`_reload`), else does the
    next piece of work (`_work`: a batch of windows scored, a decision), as long as `_pending()` says there
    is any, and puts each piece's events on the bus before the next. `in_flight` holds until they are
    there: the run waits for them before it stops. Every call to a runner goes through `_worker`'s one
    thread."""

    def __init__(self) -> None:
        self.in_flight = False
        self.reload_asked = False
        self._wake = anyio.Event()
        self._worker = Worker()

    def _pending(self) -> bool:
        raise NotImplementedError

    async def _reload(self) -> list[Input]:
        raise NotImplementedError

    async def _work(self) -> list[Input]:
        raise NotImplementedError

    @property
    def busy(self) -> bool:
        """Whether work is waiting or a piece of it is in flight."""
        return self.in_flight or self._pending()

    def _wanted(self) -> None:
        """The loop's hook has work for the task: wake it where it is not busy with a piece already."""
        if not self.in_flight:
            self._wake.set()

    async def run(self, publisher: MemoryObjectSendStream[Input]) -> None:
        with publisher, self._worker:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                while self.reload_asked or self._pending():
                    self.in_flight = True
                    try:
                        if self.reload_asked:
                            self.reload_asked = False
                            events = await self._reload()
                        else:
                            events = await self._work()
                        for event in events:
                            await publisher.send(event)
                    finally:
                        self.in_flight = False


class ScoringService(SourceTask):
    """The live scoring source (module docstring). `start` loads the models (the daemon submits what it
    returns before trading starts); `run` is its task; `observe` is the trading loop's hook."""

    def __init__(self, runner: ModelRunner, models: list[str], spec: FeatureSpec, cfg: ScoringConfig,
                 clock: Clock) -> None:
        self.runner, self.wanted_models, self.spec, self.cfg, self.clock = runner, models, spec, cfg, clock
        self.loaded: dict[str, LoadedModel] = {}  # serving
        self.failed: dict[str, str] = {}  # not serving, and why
        self.stats = {m: Stats() for m in models}
        self.windows = FeatureWindows(spec, 1, cfg.keep)
        self.wanted: dict[str, tuple[int, int]] = {}  # symbol -> (seq, ts_event) of its newest window
        self.fingerprint: dict[str, str] = {}
        self.determinism: dict[str, str] = {}
        super().__init__()

    # --- the loop's hook (runs on the event loop, for every market data input) --------------------

    def observe(self, seq: int, msg: MarketData) -> None:
        if self.windows.update(seq, msg) and self.loaded:
            self.wanted[msg.symbol] = (seq, msg.ts_event)
            self._wanted()

    # --- start-up, reloads -------------------------------------------------------------------------

    async def start(self) -> list[Input]:
        """Apply the determinism settings (before any CUDA work), then load every model: a ModelsLoaded,
        and a ModelFailed for each model that could not be loaded."""
        try:
            self.fingerprint, self.determinism = await self._in_worker(self.runner.prepare, self.cfg.load_deadline_s)
        except Exception as e:  # noqa: BLE001 - a device that cannot be prepared fails the models, not the daemon
            self.fingerprint, self.determinism = {"device": self.runner.device, "error": str(e)}, {}
            return self._loaded_events([], {m: ("load", f"the device cannot be prepared: {e}")
                                            for m in self.wanted_models})
        return await self._load(self.wanted_models)

    def request_reload(self) -> None:
        """Load the failed models again (after an operator's resume), in the scoring task."""
        if self.failed:
            self.reload_asked = True
            self._wake.set()

    async def _load(self, models: list[str]) -> list[Input]:
        failures: dict[str, tuple[str, str]] = {}
        loaded = []
        for model_id in models:
            try:
                info = await self._in_worker(lambda m=model_id: self.runner.load(m, self.spec.digest()),
                                             self.cfg.load_deadline_s)
            except ModelError as e:
                failures[model_id] = (e.what if e.what != "error" else "load", str(e))
            except TimeoutError:
                failures[model_id] = ("deadline", f"not loaded within load_deadline_s={self.cfg.load_deadline_s}")
            except Exception as e:  # noqa: BLE001 - whatever a broken model raises, it is a failure, not a crash
                failures[model_id] = ("load", f"{type(e).__name__}: {e}")
            else:
                loaded.append(info)
        serving = [*self.loaded.values(), *loaded]
        serving.sort(key=lambda m: self.wanted_models.index(m.model_id))
        for model_id, why in _check_together(serving).items():
            failures[model_id] = ("load", why)
        for info in loaded:
            if info.window > self.cfg.keep:
                failures[info.model_id] = ("load", f"its window of {info.window} rows is more than [scoring] keep"
                                                   f" ({self.cfg.keep}) rows a symbol")
        for info in loaded:
            if info.model_id not in failures:
                self.loaded[info.model_id] = info
                self.failed.pop(info.model_id, None)
        for model_id, (what, why) in failures.items():
            self.failed[model_id] = f"{what}: {why}"
            self.stats[model_id].failures += 1
            self.stats[model_id].last_failure = f"{what}: {why}"
        self.windows.window = max([m.window for m in self.loaded.values()], default=1)
        return self._loaded_events([m for m in loaded if m.model_id not in failures], failures)

    def _loaded_events(self, loaded: list[LoadedModel], failures: dict[str, tuple[str, str]]) -> list[Input]:
        now = self.clock.now()
        events: list[Input] = [ModelsLoaded(
            ts_event=now, ts_init=now, device=self.runner.device, fingerprint=self.fingerprint,
            determinism=self.determinism, feature_spec=msgspec.json.encode(self.spec), models=loaded,
            failed=sorted(failures))]
        for model_id, (what, reason) in failures.items():
            log.error("model_failed", model=model_id, what=what, reason=reason)
            events.append(ModelFailed(ts_event=now, ts_init=now, model_id=model_id, what=what, reason=reason))
        for info in loaded:
            log.info("model_loaded", model=info.model_id, device=self.runner.device, graph=info.graph,
                     window=info.window, batch=info.batch)
        return events

    # --- the task ----------------------------------------------------------------------------------

    def _pending(self) -> bool:
        return bool(self.wanted and self.loaded)

    async def _reload(self) -> list[Input]:
        return await self._load(sorted(self.failed, key=self.wanted_models.index))

    async def _work(self) -> list[Input]:
        """Score the wanted windows of up to `batch` symbols with every model that serves. Every model's
        windows are taken first, on the loop: rows that come while a model answers are not in them."""
        symbols = list(self.wanted)[: min(m.batch for m in self.loaded.values())]  # the runner's batch shape
        taken = [(s, *self.wanted.pop(s)) for s in symbols]
        events: list[Input] = []
        batches = {m.model_id: np.stack([self.windows.latest(s, m.window) for s in symbols])  # copies
                   for m in self.loaded.values()}
        for model in list(self.loaded.values()):
            windows = batches[model.model_id]
            try:
                forecasts, latency = await self._in_worker(
                    lambda m=model, w=windows: timed(self.runner.score, m.model_id, w), self.cfg.deadline_ms / 1e3)
            except ModelError as e:
                events.append(self._fail(model, symbols, e.what, str(e)))
                continue
            except TimeoutError:
                events.append(self._fail(model, symbols, "deadline",
                                         f"no answer within deadline_ms={self.cfg.deadline_ms}"))
                continue
            except Exception as e:  # noqa: BLE001 - a model that raises is a failure, not a crash
                events.append(self._fail(model, symbols, "error", f"{type(e).__name__}: {e}"))
                continue
            stats = self.stats[model.model_id]
            stats.calls += 1
            stats.latencies.append(latency)
            now = self.clock.now()
            for i, (symbol, seq, ts_event) in enumerate(taken):
                events.append(scored(model, symbol, seq, ts_event, now, windows[i], forecasts[i], latency,
                                     self.runner.input_digest))
        return events

    def _fail(self, model: LoadedModel, symbols: list[str], what: str, reason: str) -> ModelFailed:
        self.loaded.pop(model.model_id, None)
        self.failed[model.model_id] = f"{what}: {reason}"
        stats = self.stats[model.model_id]
        stats.failures += 1
        stats.last_failure = f"{what}: {reason}"
        log.error("model_failed", model=model.model_id, what=what, reason=reason, symbols=symbols)
        now = self.clock.now()
        return ModelFailed(ts_event=now, ts_init=now, model_id=model.model_id, symbol=",".join(symbols), what=what,
                           reason=reason)

    async def _in_worker(self, call: Callable[[], Any], seconds: float) -> Any:
        """`call` in the worker thread, abandoned (not waited for) after `seconds`: TimeoutError."""
        return await self._worker.call(call, seconds)

    # --- the admin socket's `models` ---------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "device": self.runner.device,
            "fingerprint": self.fingerprint,
            "models": {m: {"state": "serving" if m in self.loaded else "failed",
                           "parameter_sha256": self.loaded[m].parameter_sha256 if m in self.loaded else None,
                           "graph": self.loaded[m].graph if m in self.loaded else None,
                           "form": self.loaded[m].form if m in self.loaded else None,
                           "reason": self.failed.get(m), **self.stats[m].summary()}
                       for m in self.wanted_models},
            "windows_waiting": len(self.wanted),
        }


class Recomputer:
    """What replay scores with: the windows of a journal's runs rebuilt from its market data (fed in journal
    order to `on_input`) and the models from the store, each loaded once."""

    def __init__(self, runner: ModelRunner, keep: int) -> None:
        self.runner, self.keep = runner, keep
        self.windows: FeatureWindows | None = None  # None between a RunStarted and its ModelsLoaded
        self.models: dict[str, LoadedModel | ModelError] = {}
        self.fingerprint: dict[str, str] = {}
        self.spec: FeatureSpec | None = None
        self.served: dict[str, LoadedModel] = {}  # how the journal's scoring source served each model

    def prepare(self) -> dict[str, str]:
        self.fingerprint, _ = self.runner.prepare()
        return self.fingerprint

    def run_started(self) -> None:
        self.windows = None

    def models_loaded(self, msg: ModelsLoaded) -> None:
        """A run's scoring source started (or reloaded): its feature set makes the windows from here on."""
        if self.windows is None:
            self.spec = msgspec.json.decode(msg.feature_spec, type=FeatureSpec)
            self.windows = FeatureWindows(self.spec, 1, self.keep)
        self.served.update((m.model_id, m) for m in msg.models)

    def observe(self, seq: int, msg: MarketData) -> None:
        if self.windows is not None:
            self.windows.update(seq, msg)

    def model(self, model_id: str) -> LoadedModel:
        """The store's model `model_id`, loaded once (a ModelError once is a ModelError every time)."""
        if model_id not in self.models:
            if self.spec is None:
                raise ModelError(f"model {model_id}: no ModelsLoaded came before its scores", what="load")
            try:  # built as the journal's source built it (eager, compiled or fused); else as configured here
                self.models[model_id] = self.runner.load(model_id, self.spec.digest(),
                                                         self.served.get(model_id))
            except ModelError as e:
                self.models[model_id] = e
        found = self.models[model_id]
        if isinstance(found, ModelError):
            raise found
        return found

    def window(self, model: LoadedModel, symbol: str, as_of: int) -> np.ndarray | None:
        return None if self.windows is None else self.windows.at(symbol, as_of, model.window)

    def score(self, model: LoadedModel, window: np.ndarray) -> np.ndarray:
        """One window's forecast, float32 [horizons, quantiles]."""
        return self.runner.score(model.model_id, window[None])[0]


_RENDERED = re.compile(r"\d+\.\d+(?:e[-+]?\d+)?")  # a float as a text shows it: "1337.945", "0.5", "1.2e-05"


def _floats_out(value: Any) -> Any:
    """A message as plain data with every float replaced by None, and every float its texts render (a
    reason's "1337.945 bp of full_bps 0.5") by "#": what is left is its decision."""
    if isinstance(value, float):
        return None
    if isinstance(value, str):
        return _RENDERED.sub("#", value)
    if isinstance(value, dict):
        return {k: _floats_out(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_out(v) for v in value]
    return value


class ScoreCheck:
    """`replay --verify` for the scores of a journal: each ModelScored is computed again from its window,
    rebuilt from the journal's market data, by the store's model of its id.

    Where the run's ModelsLoaded fingerprint is this machine's (the same device, torch, CUDA and processor
    class), the recomputed outputs and input digest must equal the recorded bytes: the first score that
    differs fails the verify, named. Elsewhere the recomputed score is what the kernel is fed, and the
    verify is of the decisions: the events it derives from a score may differ from the recorded ones only in
    their floating-point numbers; the verify reports "numerically equivalent", with the largest absolute
    difference and the share of decision events identical byte for byte, and fails only where a decision
    (what is asked for, of what, how much) differs. A model whose parameters in the store are not the ones
    a score records fails the verify too, even where every output it recomputes is the same."""

    def __init__(self, runner_for: Callable[[], ModelRunner], keep: int, policies: PolicyCheck | None = None) -> None:
        self._runner_for = runner_for
        self.keep = keep
        self.policies = policies  # the decisions of served trading agents (runtime/policies.py); None: taken
        self.recomputer: Recomputer | None = None
        self.strict = True
        self.recorded_on: dict[str, str] = {}
        self.scores = self.identical = self.windows_differ = 0
        self.decisions = self.decisions_identical = 0
        self.largest = 0.0
        self.other_parameters: dict[str, tuple[str, str]] = {}  # model -> (recorded, in the store)

    def attach(self, kernel: Kernel, trading: TradingConfig) -> None:
        """The kernel that replays the journal, built with `trading`: the policies' observations read it."""
        if self.policies is not None:
            self.policies.kernel = kernel
            self.policies.size = nanos(trading.strategy.agent.trade_size)

    def on_input(self, seq: int, msg: Input) -> Input:
        """What the kernel is fed for the journal's input `msg`: itself, or a score or a decision as
        recomputed here."""
        if self.policies is not None:
            msg = self.policies.on_input(seq, msg)
        kind = type(msg)
        rec = self.recomputer
        if kind is ModelScored:
            return self._check(seq, msg)  # type: ignore[arg-type]
        if kind is ModelsLoaded and msg.source == "scoring":  # type: ignore[attr-defined]
            if rec is None:
                rec = self.recomputer = Recomputer(self._runner_for(), self.keep)
                rec.prepare()
            loaded: ModelsLoaded = msg  # type: ignore[assignment]
            rec.models_loaded(loaded)
            self.recorded_on = loaded.fingerprint
            self.strict = loaded.fingerprint == rec.fingerprint
        elif rec is not None:
            if kind is RunStarted:
                rec.run_started()
            elif kind in MARKET_DATA_TYPES:
                rec.observe(seq, msg)  # type: ignore[arg-type]
        return msg

    def _check(self, seq: int, score: ModelScored) -> Input:
        name = f"score seq {seq} ({score.model_id} for {score.symbol} as of seq {score.as_of})"
        rec = self.recomputer
        if rec is None:
            raise VerificationFailed(f"{name}: no ModelsLoaded came before it, so its window cannot be rebuilt")
        try:
            model = rec.model(score.model_id)
        except ModelError as e:
            raise VerificationFailed(f"{name} cannot be recomputed: {e}") from None
        window = rec.window(model, score.symbol, score.as_of)
        if window is None:
            raise VerificationFailed(
                f"{name}: its window is not among the rows replay keeps (the newest {self.keep} of a symbol, of"
                " its run): raise [scoring] keep")
        if model.parameter_sha256 != score.parameter_sha256:
            self.other_parameters[score.model_id] = (score.parameter_sha256, model.parameter_sha256)
        digest = rec.runner.input_digest(window)
        recomputed = rec.score(model, window)
        recorded = np.array(score.outputs, dtype=np.float32)
        self.scores += 1
        same_window = digest == score.input_digest
        if recorded.shape != recomputed.reshape(-1).shape:
            raise VerificationFailed(f"{name}: {recorded.size} outputs recorded, the model gives {recomputed.size}")
        diff = float(np.max(np.abs(recorded.astype(np.float64) - recomputed.reshape(-1))))
        self.largest = max(self.largest, diff)
        if same_window and recorded.tobytes() == recomputed.reshape(-1).tobytes():
            self.identical += 1
            return score
        if self.strict:
            what = ("its window differs from the one recorded (the features of the journal's market data are"
                    " not what they were)" if not same_window else f"its outputs differ by up to {diff:.3g}")
            params = self.other_parameters.get(score.model_id)
            more = (f"; the store's {score.model_id} has parameters {params[1][:16]}, the score was made with"
                    f" {params[0][:16]}") if params else ""
            raise VerificationFailed(
                f"{name} is not reproduced on the machine class that recorded it: {what}{more}\n"
                f"  recorded:   {score.outputs}\n  recomputed: {recomputed.reshape(-1).tolist()}")
        self.windows_differ += not same_window
        return msgspec.structs.replace(score, input_digest=digest, outputs=recomputed.reshape(-1).tolist())

    def decision(self, replayed: bytes, recorded: bytes, decode: Callable[[bytes], Any]) -> bool:
        """Whether an event derived from a recomputed score is the recorded decision, its floating-point
        numbers aside (counted either way)."""
        self.decisions += 1
        if replayed == recorded:
            self.decisions_identical += 1
            return True
        return not self.strict and _floats_out(msgspec.to_builtins(decode(replayed))) == _floats_out(
            msgspec.to_builtins(decode(recorded)))

    def finish(self) -> dict[str, Any]:
        decisions = self.policies.finish() if self.policies is not None else {}
        for model_id, (recorded, stored) in self.other_parameters.items():
            raise VerificationFailed(
                f"the scores of {model_id} were made with parameters {recorded[:16]}, but the store's {model_id}"
                f" has {stored[:16]}: the model in the store is not the one that scored")
        if not self.scores:
            return decisions
        here = self.recomputer.fingerprint if self.recomputer is not None else {}
        out: dict[str, Any] = {"scores_recomputed": self.scores, "scores_identical": self.identical}
        if self.strict and self.identical == self.scores:
            out["scores"] = f"identical (recorded and replayed on {machine(here)})"
        else:
            share = self.decisions_identical / self.decisions if self.decisions else 1.0
            out["scores"] = (f"numerically equivalent, not identical: recorded on {machine(self.recorded_on)},"
                             f" replayed on {machine(here)}; largest absolute difference {self.largest:.3g};"
                             f" {share:.1%} of {self.decisions} decision events identical, every decision the same")
            out["largest_abs_diff"] = self.largest
            out["windows_differing"] = self.windows_differ
        return out | decisions


def machine(fingerprint: dict[str, str]) -> str:
    return fingerprint.get("gpu") or fingerprint.get("cpu") or fingerprint.get("device", "?")


class Rescore:
    """`replay --rescore`: a backtest whose scores are computed again, in line, by the models the (possibly
    `--set`) configuration names: a what-if with another model or another configuration, and the backtest
    of a model's strategy on any journal.

    - A run that had a scoring source (its ModelsLoaded comes before its market data, as the daemon records
      it) is scored at the windows where it scored: the same points in the stream, other numbers.
    - A run without one (market data ingested, a run of another strategy) is scored at every market data
      input whose symbol has a whole window, right behind it, by the feature set `spec` (the
      configuration's): as if the scoring source answered every tick at once.
    The journal's ModelsLoaded and ModelFailed give way to this replay's own; a model that fails here is a
    ModelFailed here, once, and is not asked again."""

    def __init__(self, runner: ModelRunner, models: list[str], keep: int, spec: FeatureSpec) -> None:
        self.recomputer = Recomputer(runner, keep)
        self.models, self.spec = models, spec
        self.fingerprint = self.recomputer.prepare()
        self.scored: tuple[str, int] | None = None  # the last window scored: its symbol and as_of
        self.serving: list[LoadedModel] = []
        self.every: bool | None = None  # this run: scored at every window (True), where it scored (False)

    def attach(self, loop: object) -> None:
        pass  # scores are made of the market data alone: no hook on the loop

    def after(self) -> list[Input]:
        return []  # a score comes in place of the recorded one, or right behind its market data (on_input)

    def on_input(self, seq: int, msg: Input) -> list[Input]:
        """What the backtest takes in place of the journal's input `msg`, in order."""
        kind, rec = type(msg), self.recomputer
        if kind in MARKET_DATA_TYPES:
            data: MarketData = msg  # type: ignore[assignment]
            out: list[Input] = []
            if self.every is None:  # the run's market data begins, and no scoring source started before it
                self.every = True
                out += self._loaded(ModelsLoaded(ts_event=data.ts_event, ts_init=data.ts_init, device="", fingerprint={},
                                                 determinism={}, feature_spec=msgspec.json.encode(self.spec),
                                                 models=[]))
            rec.observe(seq, data)
            out.append(data)
            if self.every:
                out += self._score(data.symbol, seq, data.ts_event, data.ts_init)
            return out
        if kind is RunStarted:
            rec.run_started()
            self.every = None
        elif kind is ModelsLoaded:
            if self.every is None:
                self.every = False
            return self._loaded(msg)  # type: ignore[arg-type]
        elif kind is ModelFailed:
            return []
        elif kind is ModelScored:
            score: ModelScored = msg  # type: ignore[assignment]
            if self.every or self.scored == (score.symbol, score.as_of):
                return []  # scored here already, by every configured model
            self.scored = (score.symbol, score.as_of)
            return self._score(score.symbol, score.as_of, score.ts_event, score.ts_init)
        return [msg]

    def _loaded(self, msg: ModelsLoaded) -> list[Input]:
        reloaded = self.recomputer.windows is not None
        self.recomputer.models_loaded(msg)
        if reloaded:
            return []
        self.serving, failed = [], []
        events: list[Input] = []
        for model_id in self.models:
            try:
                self.serving.append(self.recomputer.model(model_id))
            except ModelError as e:
                failed.append(model_id)
                events.append(ModelFailed(ts_event=msg.ts_event, ts_init=msg.ts_init, model_id=model_id,
                                          what="load", reason=str(e)))
        loaded = msgspec.structs.replace(msg, device=self.recomputer.runner.device, fingerprint=self.fingerprint,
                                         determinism={}, models=self.serving, failed=failed)
        return [loaded, *events]

    def _score(self, symbol: str, as_of: int, ts_event: int, ts_init: int) -> list[Input]:
        out: list[Input] = []
        for model in list(self.serving):
            window = self.recomputer.window(model, symbol, as_of)
            if window is None:
                continue
            started = time.perf_counter_ns()
            try:
                forecast = self.recomputer.score(model, window)
            except ModelError as e:
                self.serving.remove(model)
                out.append(ModelFailed(ts_event=ts_event, ts_init=ts_init, model_id=model.model_id, symbol=symbol,
                                       what=e.what, reason=str(e)))
                continue
            out.append(scored(model, symbol, as_of, ts_event, ts_init, window, forecast,
                              time.perf_counter_ns() - started, self.recomputer.runner.input_digest))
        return out
