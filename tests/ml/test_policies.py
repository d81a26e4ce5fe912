"""A trading agent served live on the CPU, end to end on the in-memory journal: a tiny PPO agent trained here
and kept in a model store, a paper run of the strategy `agent` following it (every decision a PolicyActed
input with its observation's digest and the policy's outputs), and `replay --verify` recomputing every
decision. The observation served is the trading environment's, byte for byte. Then what must go wrong
loudly: a policy replaced in the store, one that raises, one missing, one too slow."""

from __future__ import annotations

import time
from contextlib import aclosing

import numpy as np
import pytest

from foxhunt import bootstrap, config
from foxhunt.core.kernel import BEHAVIOUR
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.inference.policy import TorchPolicyRunner
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.adapters.systemd import Notifier
from foxhunt.errors import VerificationFailed
from foxhunt.messages.base import format_fixed, nanos
from foxhunt.messages.market import MarketData
from foxhunt.messages.orders import SubmitOrder
from foxhunt.messages.scores import ModelFailed, ModelsLoaded, PolicyActed
from foxhunt.messages.system import TradingState, TradingStateChanged
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.runtime import replay
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.daemon import Operations, RunRequest, run_daemon
from foxhunt.runtime.policies import Observations, PolicyCheck, PolicyService
from foxhunt.runtime.recovery import build_kernel, trading_config
from foxhunt.runtime.report import write_report
from foxhunt.runtime.scoring import ScoreCheck
from foxhunt.training import agents
from foxhunt.training.rl.environment import TradingEnv
from foxhunt.training.rl.market import Market
from tests.ml.test_scoring import perturbed

FINGERPRINT = {"test": "1", "kernel": str(BEHAVIOUR)}  # as a run of this foxhunt records
ENV = {"FOXHUNT_AGENTS__ENV__EPISODE_STEPS": "200", "FOXHUNT_AGENTS__ENV__DECISION_EVERY": "2",
       "FOXHUNT_AGENTS__ENV__WARMUP": "32", "FOXHUNT_AGENTS__EVAL_EPISODES": "1",
       "FOXHUNT_AGENTS__PPO__STEPS": "1024", "FOXHUNT_AGENTS__PPO__EVAL_EVERY": "1024",
       "FOXHUNT_AGENTS__PPO__ROLLOUT": "64"}
FEED = 600  # market data inputs of a run, paced at RATE a second so that the policy keeps up
RATE = 400.0


def cfg_for(store: LocalModelStore, policy: str, **scoring) -> config.Config:
    env = {"FOXHUNT_STRATEGY__NAME": "agent", "FOXHUNT_STRATEGY__AGENT__POLICY": policy,
           "FOXHUNT_MODELS__STORE": str(store.root), "FOXHUNT_SCORING__DEVICE": "cpu", **ENV,
           **{f"FOXHUNT_SCORING__{k.upper()}": str(v) for k, v in scoring.items()}}
    return config.load(None, env=env)


def quotes(n: int, seed: int) -> list[MarketData]:
    """EURUSD quotes of the mean-reverting synthetic market the agent tests learn on."""
    trading = config.load(None, env={}).trading()
    return list(SyntheticFeed(seed, n, trading.build_instruments()["EURUSD"], 1_100_000_000, EventClock(), None,
                              reversion=0.05, step=20))


@pytest.fixture(scope="module")
def agent_store(tmp_path_factory) -> tuple[LocalModelStore, str]:
    root = tmp_path_factory.mktemp("agents")
    store = LocalModelStore(root / "store")
    cfg = cfg_for(store, "")
    market = Market.of("EURUSD", quotes(4000, seed=3), cfg.features, "synthetic seed 3")
    request = agents.AgentRequest("ppo", ["synthetic"], "EURUSD", None, None, 1, "cpu", "tiny", False)
    trained = agents.train(market, request, cfg, store, bootstrap.agent_engine(), root / "checkpoints")
    return store, trained.manifest.model_id


async def paper_run(cfg: config.Config, runner_for=None, n: int = FEED) -> tuple[MemoryJournalStore, dict, list]:
    """A paper run of `n` quotes on the memory journal, the agent served by `runner_for(cfg)` (the torch
    policy runner on the CPU unless a test brings one that misbehaves)."""
    runner_for = runner_for or bootstrap.policy_runner
    store = MemoryJournalStore()

    def source(trading, clock, kernel):
        agent = trading.strategy.agent
        return PolicyService(runner_for(cfg), agent.policy, cfg.features, cfg.scoring, clock, kernel,
                             nanos(agent.trade_size))

    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}), scoring=source)
    summary = await run_daemon(store, cfg, RunRequest("j", quotes(n, seed=11), EventClock(), feed_rate=RATE),
                               FINGERPRINT, ops)
    async with aclosing(store.read("j")) as pages:
        recorded = [r.message async for page in pages for r in page]
    return store, summary, recorded


def of(kind, recorded):
    return [m for m in recorded if type(m) is kind]


async def verify(journal: MemoryJournalStore, store: LocalModelStore) -> dict:
    trading = await trading_config(journal, "j", None, None)
    runner = lambda: TorchPolicyRunner(store, "cpu")
    return await replay.verify(journal, "j", trading, ScoreCheck(lambda: None, 4096, PolicyCheck(runner, 4096)))


async def test_a_served_agent_decides_on_every_decision_point_and_verify_recomputes_each(agent_store, tmp_path):
    store, policy_id = agent_store
    cfg = cfg_for(store, policy_id)
    journal, summary, recorded = await paper_run(cfg)
    loaded = of(ModelsLoaded, recorded)
    assert len(loaded) == 1 and loaded[0].models[0].model_id == policy_id and loaded[0].models[0].arch == "ppo"
    assert loaded[0].models[0].symbol == "EURUSD" and loaded[0].determinism["deterministic_algorithms"] == "on"
    decisions = of(PolicyActed, recorded)
    env = cfg.agents.env
    points = (FEED - env.warmup + env.decision_every - 1) // env.decision_every
    assert len(decisions) > 0.9 * points, "the policy kept up with a paced feed"
    assert [d.as_of for d in decisions] == sorted({d.as_of for d in decisions}), "in order, each point once"
    assert all(d.policy_id == policy_id and d.parameter_sha256 == loaded[0].models[0].parameter_sha256
               and len(d.outputs) == env.actions and len(d.input_digest) == 64 and d.latency_ns > 0 for d in decisions)
    assert all(d.fraction == (int(d.action) - env.levels) / env.levels for d in decisions)
    assert len({tuple(d.outputs) for d in decisions}) > len(decisions) // 2, "its outputs follow what it sees"
    # it trades to the position its last decision asks for (a tiny agent, briefly trained, holds one target)
    assert of(SubmitOrder, recorded) and summary["trading_state"] == "ACTIVE"
    target = int(nanos(cfg.strategy.agent.trade_size) * decisions[-1].fraction)
    assert summary["positions"]["EURUSD"] == format_fixed(target), summary["positions"]

    verified = await verify(journal, store)
    assert verified["decisions"].startswith("identical") and verified["decisions_recomputed"] == len(decisions)
    assert verified["state_digest"] == summary["state_digest"]

    await write_report(journal, ["j"], tmp_path / "report.html")  # the run's report shows the agent's targets
    page = (tmp_path / "report.html").read_text()
    assert "The agent&#x27;s targets" in page and f"EURUSD ({len(decisions)} decisions)" in page


def test_the_observation_served_is_the_trading_environments_byte_for_byte(agent_store):
    """At an episode's first step (a fresh kernel: flat, no PnL) the environment's observation and the policy
    source's, made of the same market data, are the same bytes."""
    store, policy_id = agent_store
    cfg = cfg_for(store, policy_id)
    trading = agents.agent_trading(cfg)
    data = quotes(400, seed=5)
    env_cfg = EnvConfig(warmup=32, decision_every=2)
    market = Market.of("EURUSD", data, cfg.features, "synthetic seed 5")
    env = TradingEnv(market, trading, bootstrap.agent_engine(), env_cfg)
    trained_on, _ = env.reset(options={"start": env_cfg.warmup})
    kernel = env.episode.kernel
    size = nanos(trading.strategy.agent.trade_size)
    served = Observations(cfg.features, size, 4096)
    served.serve("EURUSD", env_cfg, 1)
    for seq, msg in enumerate(data[: env_cfg.warmup + 1], start=1):
        if served.on_market(seq, msg):
            served.mark(seq, msg, kernel)
    assert list(served.points) == [env_cfg.warmup + 1]  # the first decision point: the episode's first step
    assert served.observation(env_cfg.warmup + 1)[0].tobytes() == trained_on.tobytes()


async def test_a_policy_replaced_in_the_store_fails_verify_at_its_first_decision(agent_store, tmp_path):
    store, policy_id = agent_store
    copy = LocalModelStore(tmp_path / "store")
    copy.put(policy_id, store.get(policy_id))
    journal, _, recorded = await paper_run(cfg_for(copy, policy_id), n=200)
    first = next(i for i, m in enumerate(recorded) if type(m) is PolicyActed) + 1
    perturbed(copy, policy_id, keep_manifest=False)  # one weight one ulp up, the manifest's hash rewritten
    with pytest.raises(VerificationFailed) as failed:
        await verify(journal, copy)
    text = str(failed.value)
    assert f"decision seq {first} ({policy_id} for EURUSD" in text and "not the one that decided" in text


class Misbehaving(TorchPolicyRunner):
    """The torch policy runner, misbehaving after a few decisions as real devices do."""

    def __init__(self, *args, raise_after: int | None = None, stall_after: int | None = None,
                 nan_after: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.raise_after, self.stall_after, self.nan_after = raise_after, stall_after, nan_after

    def act(self, observation):
        self.calls += 1
        if self.raise_after is not None and self.calls > self.raise_after:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if self.stall_after is not None and self.calls > self.stall_after:
            time.sleep(0.5)
        action, outputs = super().act(observation)
        if self.nan_after is not None and self.calls > self.nan_after:
            outputs = np.full_like(outputs, np.nan)  # its weights went bad: argmax still names an action
        return action, outputs


@pytest.mark.parametrize("trouble", ["raises", "missing", "too slow", "answers NaN"])
async def test_a_policy_that_cannot_decide_takes_trading_to_reducing_and_loses_nothing(agent_store, trouble):
    store, policy_id = agent_store
    policy = "ppo-000000000000" if trouble == "missing" else policy_id
    cfg = cfg_for(store, policy, deadline_ms=100)

    def runner_for(c):
        return Misbehaving(store, "cpu", raise_after=20 if trouble == "raises" else None,
                           stall_after=20 if trouble == "too slow" else None,
                           nan_after=20 if trouble == "answers NaN" else None)

    journal, summary, recorded = await paper_run(cfg, runner_for, n=300)
    failed = of(ModelFailed, recorded)
    assert len(failed) == 1, "a failed policy is not asked again until an operator resumes"
    assert failed[0].what == {"raises": "error", "missing": "load", "too slow": "deadline", "answers NaN": "error"}[trouble]
    assert failed[0].model_id == policy
    if trouble == "answers NaN":
        assert "not finite" in failed[0].reason
    changed = of(TradingStateChanged, recorded)
    assert [c.state for c in changed] == [TradingState.REDUCING] and policy in changed[0].cause
    assert summary["trading_state"] == "REDUCING" and summary["stopped"] == "feed ended"
    assert sum(1 for m in recorded if isinstance(m, MarketData)) == 300, "every market data input is journaled"
    decisions = of(PolicyActed, recorded)
    assert len(decisions) == (0 if trouble == "missing" else 20)
    verified = await verify(journal, store)
    assert verified["trading_state"] == "REDUCING"
    assert verified.get("decisions_recomputed", 0) == len(decisions)


async def test_an_operator_s_resume_loads_a_failed_policy_again_with_its_state_afresh(agent_store):
    """The policy source on its own: a policy that raised is a ModelFailed; asked for again (what `resume`
    does), it is a ModelsLoaded, decides again, and `models` shows it serving."""
    import anyio

    store, policy_id = agent_store
    cfg = cfg_for(store, policy_id)
    runner = Misbehaving(store, "cpu", raise_after=3)
    kernel = build_kernel(agents.agent_trading(cfg))
    service = PolicyService(runner, policy_id, cfg.features, cfg.scoring, EventClock(), kernel, 10**14)
    started = await service.start()
    assert [type(e) for e in started] == [ModelsLoaded]
    send, receive = anyio.create_memory_object_stream(1000)
    data = quotes(200, seed=9)
    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(service.run, send)
        events = []
        for seq, msg in enumerate(data, start=1):
            service.observe(seq, msg)
            await anyio.sleep(0.002)
        with anyio.fail_after(10):
            while not any(type(e) is ModelFailed for e in events):
                events.append(await receive.receive())
        assert [type(e) for e in events].count(PolicyActed) == 3
        assert service.status()["models"][policy_id]["state"] == "failed"
        runner.raise_after = None
        service.request_reload()
        with anyio.fail_after(10):
            reloaded = await receive.receive()
        assert type(reloaded) is ModelsLoaded and reloaded.models[0].model_id == policy_id
        for seq, msg in enumerate(quotes(20, seed=10), start=len(data) + 1):
            service.observe(seq, msg)
        with anyio.fail_after(10):
            again = await receive.receive()
        assert type(again) is PolicyActed and again.as_of > len(data)
        tg.cancel_scope.cancel()
    status = service.status()["models"][policy_id]
    assert status["state"] == "serving" and status["kind"] == "policy" and status["calls"] >= 4
    assert np.isfinite(status["latency_us"]["p50"])


class OtherHardware(TorchPolicyRunner):
    """The same policy on a machine of another class: its own fingerprint, outputs off by `noise`, and
    (`flip_at`) an action of its own at one decision."""

    def __init__(self, *args, noise: float, flip_at: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.noise, self.flip_at, self.calls = noise, flip_at, 0

    def prepare(self):
        fingerprint, switches = super().prepare()
        return fingerprint | {"cpu": "another processor"}, switches

    def act(self, observation):
        self.calls += 1
        action, outputs = super().act(observation)
        if self.calls == self.flip_at:
            action = float((int(action) + 1) % len(outputs))
        return action, outputs + np.float32(self.noise)


@pytest.mark.parametrize("flip", [False, True], ids=["same decisions", "a decision differs"])
async def test_on_other_hardware_verify_says_numerically_equivalent_or_names_the_decision_that_differs(agent_store,
                                                                                                        flip):
    store, policy_id = agent_store
    journal, summary, recorded = await paper_run(cfg_for(store, policy_id), n=200)
    decisions = [i + 1 for i, m in enumerate(recorded) if type(m) is PolicyActed]
    trading = await trading_config(journal, "j", None, None)
    other = PolicyCheck(lambda: OtherHardware(store, "cpu", noise=1e-6, flip_at=5 if flip else None), 4096)
    check = replay.verify(journal, "j", trading, ScoreCheck(lambda: None, 4096, other))
    if not flip:
        verified = await check
        assert verified["decisions"].startswith("numerically equivalent, not identical: recorded on")
        assert "another processor" in verified["decisions"] and "every action the same" in verified["decisions"]
        assert verified["state_digest"] == summary["state_digest"]
        return
    with pytest.raises(VerificationFailed) as failed:
        await check
    assert f"decision seq {decisions[4]} ({policy_id}" in str(failed.value)
    assert "the decision itself differs" in str(failed.value)


async def test_a_policy_reloaded_mid_run_verifies_its_decisions_before_and_after_with_its_state_afresh(agent_store):
    """A policy fails (it raised once), is loaded again at once (as an operator's resume would), and decides
    on: the journal holds decisions, a ModelFailed, a second ModelsLoaded and more decisions, and verify
    recomputes all of them, PPO's state afresh from the reload on as it was live."""
    store, policy_id = agent_store
    cfg = cfg_for(store, policy_id)
    journal = MemoryJournalStore()

    class ResumedAtOnce(PolicyService):
        def _fail(self, what, reason):
            failed = super()._fail(what, reason)
            self.reload_asked = True  # picked up by the task's loop after this piece's events
            return failed

    class RaisesOnce(TorchPolicyRunner):
        def __init__(self, *args, at: int, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.calls, self.at = 0, at

        def act(self, observation):
            self.calls += 1
            if self.calls == self.at:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return super().act(observation)

    def source(trading, clock, kernel):
        return ResumedAtOnce(RaisesOnce(store, "cpu", at=16), policy_id, cfg.features, cfg.scoring, clock, kernel,
                             nanos(trading.strategy.agent.trade_size))

    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}), scoring=source)
    await run_daemon(journal, cfg, RunRequest("j", quotes(400, seed=11), EventClock(), feed_rate=RATE), FINGERPRINT,
                     ops)
    async with aclosing(journal.read("j")) as pages:
        recorded = [r.message async for page in pages for r in page]
    kinds = [type(m) for m in recorded if type(m) in (ModelsLoaded, ModelFailed, PolicyActed)]
    failed_at = kinds.index(ModelFailed)
    assert kinds[:failed_at] == [ModelsLoaded] + [PolicyActed] * 15
    assert kinds[failed_at + 1] is ModelsLoaded and kinds[failed_at + 2:].count(PolicyActed) > 10
    verified = await verify(journal, store)
    assert verified["decisions"].startswith("identical") and verified["decisions_recomputed"] == kinds.count(PolicyActed)


async def test_rescore_backtests_an_agent_deciding_in_line_on_any_journal_the_same_way_every_time(agent_store):
    """`replay --rescore` with the strategy `agent`: the served run's journal backtested with its decisions
    made again at every decision point (the same policy: the journal's decisions give way, the trading is
    the same kind), and a journal of ema_cross (no agent in it) backtested as the agent would have traded
    it, twice alike; the recorded decisions alone (no --rescore) on that journal trade nothing."""
    store, policy_id = agent_store
    cfg = cfg_for(store, policy_id)
    served, summary, _ = await paper_run(cfg)
    trading = await trading_config(served, "j", None, None)
    again = await bootstrap.backtest(served, "j", trading, cfg)
    assert again["trading_state"] == "ACTIVE" and again["positions"] == summary["positions"]

    plain = MemoryJournalStore()
    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}))
    await run_daemon(plain, config.load(None, env={}), RunRequest("j", quotes(FEED, seed=11), EventClock()),
                     FINGERPRINT, ops)
    as_agent = await trading_config(plain, "j", ["strategy.name=agent", f"strategy.agent.policy={policy_id}"], None)
    first = await bootstrap.backtest(plain, "j", as_agent, cfg)
    second = await bootstrap.backtest(plain, "j", as_agent, cfg)
    assert first["orders"] > 0 and first["state_digest"] == second["state_digest"]
    assert (await bootstrap.backtest(plain, "j", as_agent))["orders"] == 0  # its own decisions: none

    missing = await trading_config(plain, "j", ["strategy.name=agent", "strategy.agent.policy=ppo-000000000000"], None)
    failed = await bootstrap.backtest(plain, "j", missing, cfg)
    assert failed["orders"] == 0 and failed["trading_state"] == "REDUCING"  # a ModelFailed, once, as live


@pytest.mark.postgres
def test_a_sweep_s_point_with_rescore_backtests_the_agent_it_names(agent_store, pg_dsn, journal_name, tmp_path):
    """bootstrap.BacktestTrainable with `rescore` (`foxhunt sweep --rescore`): a point naming an agent
    backtests that agent deciding in line on a PostgreSQL journal of ema_cross, as `replay --rescore` does;
    without it the journal's own decisions (none) are taken."""
    import anyio

    from foxhunt.adapters.journal.postgres import PostgresJournalStore

    store, policy_id = agent_store
    cfg = cfg_for(store, "")
    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}))
    anyio.run(run_daemon, PostgresJournalStore(pg_dsn), config.load(None, env={}),
              RunRequest(journal_name, quotes(FEED, seed=11), EventClock()), FINGERPRINT, ops)
    point = (f"strategy.agent.policy={policy_id}",)
    sets = ("strategy.name=agent",)
    rescored = bootstrap.BacktestTrainable(cfg, pg_dsn, (journal_name,), sets, rescore=True)(point, 1, print, tmp_path)
    recorded = bootstrap.BacktestTrainable(cfg, pg_dsn, (journal_name,), sets)(point, 1, print, tmp_path)
    assert rescored["orders"] > 0 and recorded["orders"] == 0

    async def replayed() -> dict:
        pg = PostgresJournalStore(pg_dsn)
        return await bootstrap.backtest(pg, journal_name, await trading_config(pg, journal_name, [*sets, *point], None),
                                        cfg)

    assert rescored[f"state_digest.{journal_name}"] == anyio.run(replayed)["state_digest"]


class RestoredLater(PolicyService):
    """The policy source with its policy missing from the store until the 51st quote, when an operator puts it
    there (`restore`) and resumes; `hold_s`: the source then waits that long after the load before it
    publishes it (as when the bus is busy)."""

    def __init__(self, *args, restore, hold_s: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.restore, self.hold_s, self.seen = restore, hold_s, 0

    def observe(self, seq, msg):
        super().observe(seq, msg)
        self.seen += 1
        if self.seen == 51:
            self.restore()
            self.request_reload()

    async def _reload(self):
        import anyio

        events = await super()._reload()
        await anyio.sleep(self.hold_s)
        return events


async def restored_run(agent_store, tmp_path, hold_s: float = 0.0) -> tuple[dict, list, config.Config]:
    """A paper run whose policy is missing at the start and restored 51 quotes in (RestoredLater): verify's
    summary of its journal, the journal, the configuration."""
    store, policy_id = agent_store
    empty = LocalModelStore(tmp_path / "store")
    cfg = cfg_for(empty, policy_id)

    def source(trading, clock, kernel):
        return RestoredLater(TorchPolicyRunner(empty, "cpu"), policy_id, cfg.features, cfg.scoring, clock, kernel,
                             nanos(trading.strategy.agent.trade_size),
                             restore=lambda: empty.put(policy_id, store.get(policy_id)), hold_s=hold_s)

    journal = MemoryJournalStore()
    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}), scoring=source)
    await run_daemon(journal, cfg, RunRequest("j", quotes(400, seed=11), EventClock(), feed_rate=RATE), FINGERPRINT,
                     ops)
    async with aclosing(journal.read("j")) as pages:
        recorded = [r.message async for page in pages for r in page]
    verified = await verify(journal, empty)
    return verified, recorded, cfg


async def test_a_policy_missing_at_the_start_is_served_once_resumed_on_the_grid_it_would_have_had(agent_store,
                                                                                                 tmp_path):
    """The policy is not in the store when the run starts (ModelFailed, REDUCING); 51 quotes in, past its
    warm-up, it is put there and loaded again (what `resume` does); it decides at once, on the decision
    points counted from the run's start (not from its load), and verify recomputes those decisions."""
    verified, recorded, cfg = await restored_run(agent_store, tmp_path)
    loaded = of(ModelsLoaded, recorded)
    assert [m.failed for m in loaded] == [[agent_store[1]], []] and of(ModelFailed, recorded)[0].what == "load"
    env = cfg.agents.env
    market = [seq for seq, m in enumerate(recorded, start=1) if isinstance(m, MarketData)]
    grid = market[env.warmup :: env.decision_every]  # the decision points counted from the run's start
    decisions = of(PolicyActed, recorded)
    assert decisions and {d.as_of for d in decisions} <= set(grid)
    # counted from where the load ended, not from the 51st quote, where it began: how long a load takes is the
    # machine's (a loaded CI machine's took more than three decision points); a second warm-up would be 16
    reloaded = recorded.index(loaded[1]) + 1
    assert decisions[0].as_of <= [s for s in grid if s > reloaded][1], "no second warm-up after the load"
    assert verified["decisions"].startswith("identical") and verified["decisions_recomputed"] == len(decisions)


async def test_a_policy_loaded_late_may_decide_on_inputs_journaled_before_its_load_and_verify_follows(agent_store,
                                                                                                     tmp_path):
    """Live, a reloaded policy is served from the moment it is loaded, and its ModelsLoaded reaches the
    journal after the market data the loop took meanwhile: it may decide on one of those. Held back here on
    purpose (the source waits 50 ms after the load before it publishes), the journal has decisions as of
    inputs before its ModelsLoaded, and verify, which serves the policy at that event, still recomputes them
    all (the figures of every input are kept while no policy is served)."""
    verified, recorded, _ = await restored_run(agent_store, tmp_path, hold_s=0.05)
    reloaded = recorded.index(of(ModelsLoaded, recorded)[1]) + 1
    decisions = of(PolicyActed, recorded)
    assert decisions[0].as_of < reloaded, "the race this test holds open"
    assert verified["decisions"].startswith("identical") and verified["decisions_recomputed"] == len(decisions)
