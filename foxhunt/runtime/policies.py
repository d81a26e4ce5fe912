"""The policy source: a trading agent from the model store deciding live on its symbol's market data, each
decision a journaled PolicyActed input, as the scoring source's forecasts are ModelScored inputs
(runtime/scoring.py). The agent strategy (core/strategies/agent.py) trades towards each decision through
the pre-trade gate.

- What the agent sees (`Observations`) is what the trading environment showed it in training
  (models/agent_configs.py, `observe`): its symbol's feature row after a market data input, then the
  position, the unrealised PnL and the equity since its first decision (basis points of the full
  position's notional at that decision's price), and whether the gate denied an order since its last
  decision. The figures are the kernel's right after that input (the trading loop's `on_market` hook), so
  each follows from the journal's inputs up to it. A decision point is every `decision_every`-th market
  data input of the symbol from its `warmup`-th on: the environment's step.
- Live (`PolicyService`): the source takes the newest decision point (one that comes while the policy is
  acting replaces an older one still waiting: a decision is made of the newest data, never queued behind
  stale ones), has the policy act in its worker thread (ports.PolicyRunner; the event loop never waits on
  it) and publishes every decision as a PolicyActed, with the SHA-256 of the observation's bytes and the
  outputs its action was chosen from. A recurrent policy's state runs through the decisions in the
  journal's order.
- Failures are the scoring source's: a policy missing or corrupted in the store, raising, out of memory or
  slower than `[scoring] deadline_ms` is a ModelFailed input, trading goes to REDUCING, and an operator's
  `resume` loads it again (its recurrent state afresh), also one that could not be loaded when the run
  started: the observations follow the run's market data from its start whether a policy serves or not, so
  a policy loaded later decides on the grid it would have had from the start.
- `replay --verify` (`PolicyCheck`, through scoring.ScoreCheck) makes the same observations from the
  journal's inputs and the kernel replaying them, loads the same policy from the store, and recomputes
  every decision in the journal's order: byte for byte where the run was recorded on this machine class;
  elsewhere the action must be the same, and the outputs are numerically equivalent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import structlog

from foxhunt.config import ScoringConfig
from foxhunt.core.features import FeatureSpec, FeatureWindows
from foxhunt.core.risk.gate import reference_price
from foxhunt.errors import ModelError, VerificationFailed
from foxhunt.messages.base import Input
from foxhunt.messages.market import MARKET_DATA_TYPES, MarketData
from foxhunt.messages.scores import LoadedModel, ModelFailed, ModelsLoaded, PolicyActed
from foxhunt.messages.system import RunStarted
from foxhunt.models.agent_configs import EXTRA, EnvConfig, fraction_of, notional, observe
from foxhunt.ports import Clock, PolicyRunner
from foxhunt.runtime.scoring import SourceTask, Stats, machine, timed

if TYPE_CHECKING:
    from foxhunt.core.kernel import Kernel
    from foxhunt.runtime.loop import TradingLoop

log = structlog.get_logger("foxhunt.policies")

# what the kernel says of the agent's symbol right after a decision point's market data input: position,
# unrealised PnL, equity (money nanos), the gate's denials so far, and the input's reference price (nanos)
Figures = tuple[int, int, int, int, int]


class Observations:
    """The agent's observations, made of a run's inputs from its start and the kernel after each (module
    docstring). `serve` names the policy's symbol and environment (from its first load on); `on_market`
    takes every market data input and says whether to `mark` it, which takes the kernel's figures right
    after that input: at each decision point of the policy served, and at every input while none is served
    (a policy loaded live decides at once, and the event of its load reaches the journal after inputs it
    may decide on: verify, which serves it at that event, finds their figures kept). `observation(as_of)` is
    the observation at a marked input and its figures (None where it is no longer kept: the newest `keep`
    are), and `decided(figures)` says the policy decided on it (its figures are kept by the caller: more
    points may come, and push it out, while the policy acts)."""

    def __init__(self, spec: FeatureSpec, size: int, keep: int) -> None:
        self.windows = FeatureWindows(spec, 1, keep)
        self.size, self.keep = size, keep
        self.symbol, self.multiplier = "", 1  # the policy's, once one was loaded (serve), and its environment
        self.env: EnvConfig | None = None
        self.events: dict[str, int] = {}  # market data inputs of each symbol so far in the run
        self.points: dict[int, Figures] = {}  # seq -> figures, the newest `keep` decision points
        self.start: tuple[int, int] | None = None  # (equity, notional) at the first decision
        self.denied = 0  # the gate's denials at the last decision

    def serve(self, symbol: str, env: EnvConfig, multiplier: int) -> str:
        """The policy's symbol and environment from here on: "", or why not (a run serves one of each)."""
        if self.env is not None and (symbol, env) != (self.symbol, self.env):
            return "the store's policy now trades another symbol or environment than this run serves: restart the daemon"
        self.symbol, self.env, self.multiplier = symbol, env, multiplier
        return ""

    def on_market(self, seq: int, msg: MarketData) -> bool:
        """Take in market data input `seq`; whether to mark it (a decision point, or no policy served)."""
        self.windows.update(seq, msg)
        index = self.events.get(msg.symbol, 0)  # of this input among the symbol's, from 0 (the environment's)
        self.events[msg.symbol] = index + 1
        return self.decides(msg.symbol, index) or self.env is None

    def decides(self, symbol: str, index: int) -> bool:
        """Whether the `index`-th market data input of `symbol` (from 0) is a decision point of the policy."""
        env = self.env
        return (env is not None and symbol == self.symbol and index >= env.warmup
                and (index - env.warmup) % env.decision_every == 0)

    def mark(self, seq: int, msg: MarketData, kernel: Kernel) -> None:
        pos = kernel.portfolio.positions.get(msg.symbol)
        self.points[seq] = (pos.quantity if pos is not None else 0, pos.unrealized_pnl if pos is not None else 0,
                            kernel.portfolio.equity, kernel.orders.denied, reference_price(msg, 0)[0])
        if len(self.points) > self.keep:
            del self.points[next(iter(self.points))]

    def observation(self, as_of: int) -> tuple[np.ndarray, Figures] | None:
        figures, row = self.points.get(as_of), self.windows.at(self.symbol, as_of, 1)
        if figures is None or row is None:
            return None
        position, unrealized, equity, denied, price = figures
        start_equity, full = self.start if self.start is not None else (equity, notional(price, self.size, self.multiplier))
        out = np.empty(row.shape[1] + EXTRA, dtype=np.float32)
        observe(out, row[0], position, self.size, unrealized, equity - start_equity, full,
                self.start is not None and denied != self.denied)
        return out, figures

    def decided(self, figures: Figures) -> None:
        _, _, equity, denied, price = figures
        if self.start is None:
            self.start = (equity, notional(price, self.size, self.multiplier))
        self.denied = denied


def unusable(action: float, outputs: np.ndarray) -> str:
    """What makes a policy's answer no decision ("" if nothing): outputs or an action that are not finite
    numbers (a policy whose weights went bad, a device's fault)."""
    if not (math.isfinite(action) and bool(np.isfinite(outputs).all())):
        return f"its outputs are not finite numbers: action {action}, outputs {outputs.reshape(-1).tolist()}"
    return ""


def policy_loaded(runner: PolicyRunner, fingerprint: dict[str, str], determinism: dict[str, str], spec: FeatureSpec,
                  policy_id: str, served: LoadedModel | None, ts_event: int, ts_init: int) -> ModelsLoaded:
    """The policy source's ModelsLoaded: the policy it serves, or (None) the one it could not load."""
    return ModelsLoaded(ts_event=ts_event, ts_init=ts_init, device=runner.device, fingerprint=fingerprint,
                        determinism=determinism, feature_spec=msgspec.json.encode(spec),
                        models=[served] if served is not None else [], failed=[] if served is not None else [policy_id],
                        source="policy")


def acted(policy: LoadedModel, env: EnvConfig, symbol: str, as_of: int, ts_event: int, ts_init: int,
          observation: np.ndarray, action: float, outputs: np.ndarray, latency_ns: int,
          digest: Callable[[np.ndarray], str]) -> PolicyActed:
    """The event of one decision: the target fraction its action means, the outputs as Python floats
    (exactly the float32 values)."""
    fraction, value = fraction_of(action, env)
    return PolicyActed(ts_event=ts_event, ts_init=ts_init, policy_id=policy.model_id,
                       parameter_sha256=policy.parameter_sha256, symbol=symbol, as_of=as_of, action=value,
                       fraction=fraction, input_digest=digest(observation), outputs=outputs.reshape(-1).tolist(),
                       latency_ns=latency_ns)


class PolicyService(SourceTask):
    """The live policy source (module docstring). The daemon serves it as it serves the scoring source:
    `start` loads the policy (the daemon submits what it returns before trading starts), `run` is its
    task, `observe` the trading loop's hook, `busy`, `failed`, `request_reload` and `status` as the scoring
    source's."""

    def __init__(self, runner: PolicyRunner, policy_id: str, spec: FeatureSpec, cfg: ScoringConfig, clock: Clock,
                 kernel: Kernel, size: int) -> None:
        self.runner, self.policy_id, self.spec, self.cfg, self.clock = runner, policy_id, spec, cfg, clock
        self.kernel, self.size = kernel, size
        self.loaded: dict[str, LoadedModel] = {}  # the policy, while it serves
        self.failed: dict[str, str] = {}  # the policy, while it does not, and why
        self.stats = Stats()
        self.observations = Observations(spec, size, cfg.keep)  # from the run's start, served or not
        self.wanted: tuple[int, int] | None = None  # (seq, ts_event) of the newest decision point not taken
        self.fingerprint: dict[str, str] = {}
        self.determinism: dict[str, str] = {}
        super().__init__()

    # --- the loop's hook (on the event loop, for every market data input, right after the kernel) ------

    def observe(self, seq: int, msg: MarketData) -> None:
        obs = self.observations
        if obs.on_market(seq, msg):
            obs.mark(seq, msg, self.kernel)
            if self.loaded:  # then a policy is served, and what on_market marks is a decision point
                self.wanted = (seq, msg.ts_event)
                self._wanted()

    # --- start-up, reloads -------------------------------------------------------------------------

    async def start(self) -> list[Input]:
        try:
            self.fingerprint, self.determinism = await self._worker.call(self.runner.prepare, self.cfg.load_deadline_s)
        except Exception as e:  # noqa: BLE001 - a device that cannot be prepared fails the policy, not the daemon
            self.fingerprint = {"device": self.runner.device, "error": str(e)}
            return self._loaded(None, ("load", f"the device cannot be prepared: {e}"))
        return await self._load()

    def request_reload(self) -> None:
        """Load the policy again (after an operator's resume), in the source's task."""
        if self.failed:
            self.reload_asked = True
            self._wake.set()

    async def _load(self) -> list[Input]:
        try:
            info, env = await self._worker.call(lambda: self.runner.load(self.policy_id, self.spec.digest()),
                                                self.cfg.load_deadline_s)
        except ModelError as e:
            return self._loaded(None, (e.what if e.what != "error" else "load", str(e)))
        except TimeoutError:
            return self._loaded(None, ("deadline", f"not loaded within load_deadline_s={self.cfg.load_deadline_s}"))
        except Exception as e:  # noqa: BLE001 - whatever a broken policy raises is a failure, not a crash
            return self._loaded(None, ("load", f"{type(e).__name__}: {e}"))
        inst = self.kernel.instruments.get(info.symbol)
        if inst is None:
            return self._loaded(None, ("load", f"it trades {info.symbol}, which is not a configured instrument"))
        if why := self.observations.serve(info.symbol, env, inst.multiplier):
            return self._loaded(None, ("load", why))
        self.loaded = {self.policy_id: info}
        self.failed.clear()
        return self._loaded(info, None)

    def _loaded(self, info: LoadedModel | None, failure: tuple[str, str] | None) -> list[Input]:
        now = self.clock.now()
        events: list[Input] = [policy_loaded(self.runner, self.fingerprint, self.determinism, self.spec, self.policy_id,
                                             info if failure is None else None, now, now)]
        if failure is not None:
            what, reason = failure
            self._failed(what, reason)
            events.append(ModelFailed(ts_event=now, ts_init=now, model_id=self.policy_id, what=what, reason=reason))
        else:
            log.info("policy_loaded", policy=self.policy_id, device=self.runner.device)
        return events

    def _failed(self, what: str, reason: str) -> None:
        self.loaded.clear()
        self.failed[self.policy_id] = f"{what}: {reason}"
        self.stats.failures += 1
        self.stats.last_failure = f"{what}: {reason}"
        log.error("policy_failed", policy=self.policy_id, what=what, reason=reason)

    # --- the task ----------------------------------------------------------------------------------

    def _pending(self) -> bool:
        return self.wanted is not None and bool(self.loaded)

    async def _reload(self) -> list[Input]:
        return await self._load()

    async def _work(self) -> list[Input]:
        """The policy acts on the newest decision point, its observation made on the loop."""
        assert self.wanted is not None and self.observations.env is not None
        (seq, ts_event), self.wanted = self.wanted, None
        info = self.loaded[self.policy_id]
        seen = self.observations.observation(seq)
        if seen is None:  # kept no longer: `keep` decision points came while the policy acted
            return []
        obs, figures = seen
        try:
            (action, outputs), latency = await self._worker.call(lambda: timed(self.runner.act, obs),
                                                                 self.cfg.deadline_ms / 1e3)
        except ModelError as e:
            return [self._fail(e.what, str(e))]
        except TimeoutError:
            return [self._fail("deadline", f"no answer within deadline_ms={self.cfg.deadline_ms}")]
        except Exception as e:  # noqa: BLE001 - a policy that raises is a failure, not a crash
            return [self._fail("error", f"{type(e).__name__}: {e}")]
        self.stats.calls += 1
        self.stats.latencies.append(latency)
        if why := unusable(action, outputs):  # a policy that answers NaN is failing, as one that raises
            return [self._fail("error", why)]
        self.observations.decided(figures)
        return [acted(info, self.observations.env, self.observations.symbol, seq, ts_event, self.clock.now(), obs, action,
                      outputs, latency, self.runner.input_digest)]

    def _fail(self, what: str, reason: str) -> ModelFailed:
        self._failed(what, reason)
        now = self.clock.now()
        return ModelFailed(ts_event=now, ts_init=now, model_id=self.policy_id, symbol=self.observations.symbol,
                           what=what, reason=reason)

    # --- the admin socket's `models` ---------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        info = self.loaded.get(self.policy_id)
        return {
            "device": self.runner.device,
            "fingerprint": self.fingerprint,
            "models": {self.policy_id: {
                "kind": "policy", "state": "serving" if info is not None else "failed",
                "parameter_sha256": info.parameter_sha256 if info is not None else None,
                "symbol": self.observations.symbol or None,
                "reason": self.failed.get(self.policy_id), **self.stats.summary()}},
            "decisions_waiting": int(self.wanted is not None),
        }


class PolicyCheck:
    """`replay --verify` of the decisions of a journal's served policies (module docstring), through
    ScoreCheck, which hands it the journal's inputs in order before the kernel takes each (`on_input`) and
    the kernel replaying them (`kernel`). A decision point's figures are the kernel's after its input:
    read when the next input comes (only derived events lie between, which change nothing in the kernel).
    A PolicyActed of a policy no ModelsLoaded of its run served (a training episode's, written by
    `foxhunt train --record`) is taken as recorded."""

    def __init__(self, runner_for: Callable[[], PolicyRunner], keep: int) -> None:
        self._runner_for, self.keep = runner_for, keep
        self.runner: PolicyRunner | None = None
        self.fingerprint: dict[str, str] = {}
        self.kernel: Kernel | None = None  # the kernel replaying the journal, and the agent strategy's trade
        self.size = 0  # size in nanos (ScoreCheck.attach)
        self.observations: Observations | None = None
        self.pending: tuple[int, MarketData] | None = None  # a decision point whose figures are not read yet
        self.served: LoadedModel | None = None  # the policy the run's source serves (as the journal says)
        self.recomputing: tuple[LoadedModel, EnvConfig] | ModelError | None = None  # the store's
        self.strict = True
        self.recorded_on: dict[str, str] = {}
        self.decisions = self.identical = 0
        self.largest = 0.0

    def on_input(self, seq: int, msg: Input) -> Input:
        """What the kernel is fed for the journal's input `msg`: itself, or a decision as recomputed here."""
        if self.pending is not None:
            assert self.observations is not None and self.kernel is not None
            self.observations.mark(*self.pending, self.kernel)
            self.pending = None
        kind = type(msg)
        if kind in MARKET_DATA_TYPES:
            if self.observations is not None and self.observations.on_market(seq, msg):  # type: ignore[arg-type]
                self.pending = (seq, msg)  # type: ignore[assignment]
        elif kind is PolicyActed:
            return self._check(seq, msg)  # type: ignore[arg-type]
        elif kind is ModelsLoaded:
            self._loaded(msg)  # type: ignore[arg-type]
        elif kind is RunStarted:
            self.observations, self.served, self.recomputing = None, None, None
        return msg

    def _loaded(self, msg: ModelsLoaded) -> None:
        """The run's policy source started (its observations with it, as live: served or not), or loaded its
        policy (again)."""
        if msg.source != "policy":
            return
        spec = msgspec.json.decode(msg.feature_spec, type=FeatureSpec)
        if self.observations is None:
            self.observations = Observations(spec, self.size, self.keep)
        if not msg.models:
            return
        info = self.served = msg.models[0]
        if self.runner is None:
            self.runner = self._runner_for()
            self.fingerprint, _ = self.runner.prepare()
        self.recorded_on = msg.fingerprint
        self.strict = msg.fingerprint == self.fingerprint
        try:  # the store's policy, its state afresh (a reload's too), served as the journal's was
            self.recomputing = self.runner.load(info.model_id, spec.digest(), info)
        except ModelError as e:
            self.recomputing = e
            return
        assert self.kernel is not None
        inst = self.kernel.instruments.get(info.symbol)
        if inst is not None:  # else its load failed live: no decision of it follows
            self.observations.serve(info.symbol, self.recomputing[1], inst.multiplier)

    def _check(self, seq: int, act: PolicyActed) -> Input:
        served = self.served
        if served is None or act.policy_id != served.model_id:
            return act
        name = f"decision seq {seq} ({act.policy_id} for {act.symbol} as of seq {act.as_of})"
        if isinstance(self.recomputing, ModelError) or self.recomputing is None:
            raise VerificationFailed(f"{name} cannot be recomputed: {self.recomputing or 'its policy was not loaded'}")
        policy, env = self.recomputing
        assert self.observations is not None and self.runner is not None
        if policy.parameter_sha256 != act.parameter_sha256:
            raise VerificationFailed(f"{name} was made with parameters {act.parameter_sha256[:16]}, but the store's"
                                     f" {act.policy_id} has {policy.parameter_sha256[:16]}: the policy in the store is"
                                     " not the one that decided")
        seen = self.observations.observation(act.as_of)
        if seen is None:
            raise VerificationFailed(f"{name}: its observation is not among the decision points replay keeps (the"
                                     f" newest {self.keep}): raise [scoring] keep")
        obs, figures = seen
        try:
            action, outputs = self.runner.act(obs)
        except ModelError as e:
            raise VerificationFailed(f"{name} cannot be recomputed: {e}") from None
        if why := unusable(action, outputs):
            raise VerificationFailed(f"{name} cannot be recomputed: {why}")
        self.observations.decided(figures)
        again = acted(policy, env, act.symbol, act.as_of, act.ts_event, act.ts_init, obs, action, outputs,
                      act.latency_ns, self.runner.input_digest)
        self.decisions += 1
        recorded = np.array(act.outputs, dtype=np.float32)
        if recorded.shape == outputs.reshape(-1).shape:
            self.largest = max(self.largest, float(np.max(np.abs(recorded.astype(np.float64) - outputs.reshape(-1)),
                                                          initial=0.0)))
        same = (again.input_digest == act.input_digest and again.action == act.action
                and recorded.tobytes() == outputs.reshape(-1).tobytes())
        if same:
            self.identical += 1
            return act
        if self.strict or again.action != act.action or again.fraction != act.fraction:
            what = ("its observation differs from the one recorded" if again.input_digest != act.input_digest
                    else "its action differs" if again.action != act.action else "its outputs differ")
            where = "on the machine class that recorded it" if self.strict else "(the decision itself differs)"
            raise VerificationFailed(
                f"{name} is not reproduced {where}: {what}\n"
                f"  recorded:   action {act.action}, outputs {act.outputs}\n"
                f"  recomputed: action {again.action}, outputs {again.outputs}")
        return again

    def finish(self) -> dict[str, Any]:
        if not self.decisions:
            return {}
        out: dict[str, Any] = {"decisions_recomputed": self.decisions, "decisions_identical": self.identical}
        if self.strict and self.identical == self.decisions:
            out["decisions"] = f"identical (recorded and replayed on {machine(self.fingerprint)})"
        else:
            out["decisions"] = (f"numerically equivalent, not identical: recorded on {machine(self.recorded_on)},"
                                f" replayed on {machine(self.fingerprint)}; largest absolute difference of the"
                                f" outputs {self.largest:.3g}; every action the same")
        return out



class Redecide:
    """`replay --rescore` for the strategy `agent`: a backtest whose decisions are made again, in line, by the
    stored agent the (possibly `--set`) configuration names (`strategy.agent.policy`): a what-if with another
    agent, or the backtest of an agent on any journal, through the daemon's own path (the observations of
    the backtest's kernel, the pre-trade gate, the simulated venue).

    The policy decides at every decision point of each run, right behind its market data input, as if it
    answered at once (live, a point that comes while it acts is passed over). The journal's own decisions,
    and its policy source's ModelsLoaded and ModelFailed, give way to this backtest's: a ModelsLoaded after
    each RunStarted, and a ModelFailed, once, where the policy cannot be loaded or cannot decide.
    `attach(loop)` takes the trading loop's market data hook; `after()` hands the loop the decision the
    input it just took set off."""

    def __init__(self, runner: PolicyRunner, policy_id: str, spec: FeatureSpec, keep: int, size: int) -> None:
        self.runner, self.policy_id, self.spec, self.keep, self.size = runner, policy_id, spec, keep, size
        self.fingerprint, self.determinism = runner.prepare()
        self.kernel: Kernel | None = None
        self.served: tuple[LoadedModel, EnvConfig] | None = None
        self.observations: Observations | None = None
        self.due: tuple[int, MarketData] | None = None  # the decision point the loop just took
        self.policies: set[str] = set()  # the journal's own policies: their decisions give way

    def attach(self, loop: TradingLoop) -> None:
        self.kernel = loop.kernel
        loop.on_market = self.observe

    def observe(self, seq: int, msg: MarketData) -> None:
        obs = self.observations
        if obs is not None and obs.on_market(seq, msg):
            assert self.kernel is not None
            obs.mark(seq, msg, self.kernel)
            self.due = (seq, msg)

    def on_input(self, seq: int, msg: Input) -> list[Input]:
        """What the backtest takes in place of the journal's input `msg`, in order."""
        kind = type(msg)
        if kind is RunStarted:
            return [msg, *self._load(msg)]
        if kind is ModelsLoaded and msg.source == "policy":  # type: ignore[attr-defined]
            self.policies.update(m.model_id for m in msg.models)  # type: ignore[attr-defined]
            self.policies.update(msg.failed)  # type: ignore[attr-defined]
            return []
        if kind is PolicyActed or (kind is ModelFailed and msg.model_id in self.policies | {self.policy_id}):  # type: ignore[attr-defined]
            return []
        return [msg]

    def after(self) -> list[Input]:
        """The decision at the decision point the loop just took, if it was one: one PolicyActed, or a
        ModelFailed (then no more decisions in this run)."""
        if self.due is None:
            return []
        (seq, msg), self.due = self.due, None
        assert self.observations is not None and self.served is not None
        seen = self.observations.observation(seq)
        if seen is None:
            return []
        obs, figures = seen
        info, env = self.served
        started = time.perf_counter_ns()
        try:
            action, outputs = self.runner.act(obs)
            why = unusable(action, outputs)
        except ModelError as e:
            why = str(e)
        if why:
            self.observations = None  # no more decisions in this run
            return [ModelFailed(ts_event=msg.ts_event, ts_init=msg.ts_init, model_id=self.policy_id,
                                symbol=msg.symbol, what="error", reason=why)]
        self.observations.decided(figures)
        return [acted(info, env, msg.symbol, seq, msg.ts_event, msg.ts_init, obs, action, outputs,
                      time.perf_counter_ns() - started, self.runner.input_digest)]

    def _load(self, started: RunStarted) -> list[Input]:
        """The policy afresh for a run (its state, its observations from the run's first input)."""
        self.observations, self.due, failure = None, None, ""
        try:
            self.served = self.runner.load(self.policy_id, self.spec.digest())
        except ModelError as e:
            self.served, failure = None, str(e)
        ts = started.ts_event
        if self.served is not None:
            info, env = self.served
            inst = self.kernel.instruments.get(info.symbol) if self.kernel is not None else None
            if inst is None:
                failure = f"it trades {info.symbol}, which is not a configured instrument"
            else:
                self.observations = Observations(self.spec, self.size, self.keep)
                self.observations.serve(info.symbol, env, inst.multiplier)
        served = self.served[0] if self.served is not None and not failure else None
        loaded = policy_loaded(self.runner, self.fingerprint, self.determinism, self.spec, self.policy_id, served, ts,
                               started.ts_init)
        if not failure:
            return [loaded]
        return [loaded, ModelFailed(ts_event=ts, ts_init=started.ts_init, model_id=self.policy_id, what="load",
                                    reason=failure)]
