"""Reinforcement-learning agents on the CPU: the trading environment over foxhunt's own kernel (its API, its
reward, a denial it shows, an episode journaled in PostgreSQL and verified), the replay memory and the
losses against their definitions, and the proof that both agents learn: on a market with a planted edge
(mean-reverting quotes, the edge well above the spread and fees) each beats the flat and the random
policies on held-out data, and on a random walk with fees each learns to trade little. Same seed, same
weights, in one process and in two; a resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.config import TradingConfig
from foxhunt.errors import ConfigError, JournalMismatch
from foxhunt.messages.orders import OrderDenied
from foxhunt.messages.scores import PolicyActed
from foxhunt.models.agent_configs import EnvConfig, PpoConfig, RainbowConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import parameter_hash
from foxhunt.models.iqn import quantile_huber_loss
from foxhunt.runtime import replay
from foxhunt.runtime.clock import EventClock
from foxhunt.training.rl.environment import TradingEnv, VectorTradingEnv
from foxhunt.training.rl.episode import write
from foxhunt.training.rl.evaluation import compare
from foxhunt.training.rl.market import Market
from foxhunt.training.rl.ppo import PpoTrainer
from foxhunt.training.rl.rainbow import RainbowTrainer
from foxhunt.training.rl.replay import NStep, PrioritizedReplay, SumTree

ROOT = Path(__file__).resolve().parents[2]
# the planted edge: the mid pulled back 5% of its distance from 1.1 per quote (a half-life of about 14
# quotes) and moved up to 20 ticks by chance, so a deviation is worth several times the spread and fees
EDGE = {"reversion": 0.05, "step": 20}
NO_EDGE = {"reversion": 0.0, "step": 20}
ENV = EnvConfig(episode_steps=500, decision_every=5)
# the fixed small budgets of the proof that they learn: Rainbow passes both tests from about 10,000 steps
# (at 12,000: 86 bp an episode on the edge, turnover 0.001 on the random walk), PPO from about 12,000
LEARNING_STEPS = {"rainbow": 12_000, "ppo": 20_000}


def trading_config(**risk) -> TradingConfig:
    cfg = config.load(None, {})
    strategy = msgspec.convert({"name": "agent"}, type(cfg.strategy))
    limits = msgspec.structs.replace(cfg.risk, **risk)
    return msgspec.structs.replace(cfg, strategy=strategy, risk=limits).trading()


def market(n: int = 60_000, seed: int = 3, **shape) -> Market:
    trading = trading_config()
    feed = SyntheticFeed(seed, n, trading.build_instruments()["EURUSD"], 1_100_000_000, EventClock(), None,
                         **(shape or EDGE))
    return Market.of("EURUSD", list(feed), config.Config().features, f"synthetic seed {seed}")


@pytest.fixture(scope="module")
def edge() -> Market:
    return market(**EDGE)


@pytest.fixture(scope="module")
def no_edge() -> Market:
    return market(**NO_EDGE)


def env(m: Market, cfg: EnvConfig = ENV, **kw) -> TradingEnv:
    return TradingEnv(m, kw.pop("trading", None) or trading_config(), bootstrap.agent_engine(), cfg, **kw)


# --- the environment -------------------------------------------------------------------------------------


def test_environment_passes_gymnasiums_checker(edge):
    check_env(env(edge), skip_render_check=True)
    check_env(env(edge, msgspec.structs.replace(ENV, continuous=True)), skip_render_check=True)


def test_rewards_add_up_to_the_equity_the_kernel_books_spread_and_fees_paid(edge):
    e = env(edge, msgspec.structs.replace(ENV, decision_every=1, episode_steps=300))
    e.reset(seed=4)
    rng = np.random.default_rng(0)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = e.step(int(rng.integers(ENV.actions)))
        total += reward
        done = terminated or truncated
    summary = info["episode"]
    assert summary["fills"] > 50 and summary["commissions_bp"] > 0
    assert total == pytest.approx(summary["equity_bp"], rel=1e-9, abs=1e-9)
    assert summary["equity_bp"] < 0  # trading at random pays the spread and the fees on every round trip


def test_an_order_the_gate_denies_is_in_the_next_observation(edge):
    from decimal import Decimal

    e = env(edge, trading=trading_config(max_order_qty=Decimal("50000")), record=True)
    obs, _ = e.reset(seed=1)
    assert obs[-1] == 0.0
    obs, _, _, _, info = e.step(ENV.actions - 1)  # long 100000, twice the largest order the gate allows
    assert info["denied"] and obs[-1] == 1.0 and info["position"] == 0 and obs[-4] == 0.0
    assert [m.reason for m, _ in e.episode.records if type(m) is OrderDenied] == ["MAX_ORDER_QTY"]
    obs, _, _, _, info = e.step(ENV.levels + 1)  # long 50000: allowed
    assert not info["denied"] and obs[-1] == 0.0 and obs[-4] == 0.5


def test_a_bad_action_is_refused_with_its_range():
    cfg = ENV
    e = env(market(3000))
    e.reset(seed=1)
    with pytest.raises(ValueError, match="a discrete action must be in 0..4, got 5"):
        e.step(5)
    with pytest.raises(ConfigError, match="strategy 'agent'"):
        TradingEnv(market(3000), config.Config().trading(), bootstrap.agent_engine(), cfg)


def test_a_vector_step_with_a_bad_action_moves_no_episode_and_gathers_what_one_at_a_time_gives(edge):
    v = VectorTradingEnv(edge, trading_config(), bootstrap.agent_engine(), ENV, 4)
    v.reset(seed=3)
    where = [(ep.index, ep.steps) for ep in v.episodes]
    with pytest.raises(ValueError, match="a discrete action must be in 0..4, got 9"):
        v.step(np.array([4, 0, 9, 2]))
    with pytest.raises(ValueError, match="a discrete action must be in 0..4, got -1"):
        v.step(np.array([4, -1, 0, 2]))  # not the table's last entry, as a list's index -1 would be
    with pytest.raises(ValueError, match="3 actions for 4 environments"):
        v.step(np.array([4, 0, 2]))
    assert [(ep.index, ep.steps) for ep in v.episodes] == where  # checked before any episode stepped
    for _ in range(3):
        obs, *_ = v.step(np.array([4, 0, 1, 2]))
        one = np.empty_like(obs)
        for i, ep in enumerate(v.episodes):  # the single environment's way, an episode at a time
            v.core.observe(ep, one[i], bool(obs[i, -1]))
        assert obs.tobytes() == one.tobytes()
    assert [ep.steps for ep in v.episodes] == [3, 3, 3, 3]


def test_vector_episodes_are_seeded_and_restart_in_the_same_step(edge):
    short = msgspec.structs.replace(ENV, episode_steps=7)
    runs = []
    for _ in range(2):
        v = VectorTradingEnv(edge, trading_config(), bootstrap.agent_engine(), short, 4)
        obs, _ = v.reset(seed=11)
        seen = [obs]
        ended = 0
        for k in range(10):
            obs, _, _, truncated, infos = v.step(np.full(4, k % ENV.actions))
            seen.append(obs)
            if k == 6:
                assert truncated.all() and all(e is not None for e in infos["episode"])
                assert not np.array_equal(infos["final_obs"][0], obs[0])  # a new episode's first observation
                ended += 1
        runs.append(np.stack(seen))
        assert ended == 1
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0][0, 0], runs[0][0, 1])  # each episode its own start


@pytest.mark.postgres
async def test_a_journaled_episode_verifies_byte_for_byte(edge, pg_dsn, journal_name):
    trading = trading_config()
    e = env(edge, msgspec.structs.replace(ENV, decision_every=1, episode_steps=400), trading=trading, record=True)
    e.reset(seed=2)
    rng = np.random.default_rng(5)
    done = False
    while not done:
        _, _, terminated, truncated, _ = e.step(int(rng.integers(ENV.actions)))
        done = terminated or truncated
    store = PostgresJournalStore(pg_dsn)
    last = await write(store, journal_name, e.episode, trading)
    assert last == len(e.episode.records)
    acted = sum(type(m) is PolicyActed for m, _ in e.episode.records)
    assert acted > 100
    result = await replay.verify(store, journal_name, trading)
    assert result["inputs"] + result["verified"] == last and result["fills"] == e.episode.summary()["fills"]
    with pytest.raises(JournalMismatch, match="already has events"):
        await write(store, journal_name, e.episode, trading)


# --- replay memory and losses ---------------------------------------------------------------------------


def test_sum_tree_sums_and_finds_as_prefix_sums_do():
    rng = np.random.default_rng(0)
    tree = SumTree(37)
    p = rng.random(37)
    tree.update(np.arange(37), p)
    assert tree.total == pytest.approx(p.sum(), rel=1e-15)
    mass = rng.random(1000) * p.sum()
    expected = np.searchsorted(np.cumsum(p), mass, side="right")
    assert np.array_equal(tree.find(mass), expected)


def test_prioritised_sampling_is_seeded_and_weighted():
    def draws(seed):
        memory = PrioritizedReplay(64, 3, alpha=1.0, seed=seed)
        memory.add([(np.full(3, i, np.float32), i % 5, float(i), np.zeros(3, np.float32), 0.9) for i in range(60)])
        for i in range(60, 64):
            memory.add([(np.full(3, i, np.float32), i % 5, float(i), np.zeros(3, np.float32), 0.9)])
        memory.update(np.arange(64), np.where(np.arange(64) == 7, 100.0, 1.0))
        return memory.sample(32, beta=1.0)
    a, b = draws(1), draws(1)
    assert np.array_equal(a.index, b.index) and np.array_equal(a.weight, b.weight)
    assert (a.index == 7).sum() > 8  # 100 / 163 of the mass
    assert a.weight[a.index == 7].max() < a.weight[a.index != 7].min()


def test_n_step_returns_fold_and_cut_at_the_end_of_an_episode():
    fold = NStep(3, 0.5)
    o = [np.full(1, i, np.float32) for i in range(6)]
    assert fold.push(o[0], 0, 1.0, o[1], False, False) == []
    assert fold.push(o[1], 1, 2.0, o[2], False, False) == []
    (t,) = fold.push(o[2], 2, 4.0, o[3], False, False)
    assert t[1] == 0 and t[2] == 1.0 + 0.5 * 2.0 + 0.25 * 4.0 and t[3] is o[3] and t[4] == 0.125
    ends = fold.push(o[3], 3, 8.0, o[4], True, False)  # terminated: no bootstrap
    assert [(x[1], x[2], x[4]) for x in ends] == [(1, 2.0 + 2.0 + 2.0, 0.0), (2, 4.0 + 4.0, 0.0), (3, 8.0, 0.0)]


def test_quantile_huber_loss_is_the_papers_sum_of_means():
    g = torch.Generator().manual_seed(0)
    z, taus, target = torch.randn(2, 3, generator=g), torch.rand(2, 3, generator=g), torch.randn(2, 4, generator=g)
    got = quantile_huber_loss(z, taus, target, kappa=1.0)
    for b in range(2):
        total = 0.0
        for i in range(3):
            terms = []
            for j in range(4):
                d = float(target[b, j] - z[b, i])
                huber = 0.5 * d * d if abs(d) <= 1.0 else abs(d) - 0.5
                terms.append(abs(float(taus[b, i]) - (d < 0)) * huber)
            total += sum(terms) / 4
        assert float(got[b]) == pytest.approx(total, rel=1e-6)


# --- they learn ------------------------------------------------------------------------------------------


def trained(kind: str, m: Market, steps: int = 20_000, seed: int = 5, checkpoint: Path | None = None,
            device: str = "cpu", **over):
    make_deterministic(1)
    train, held = m.split(0.25)
    envs = VectorTradingEnv(train, trading_config(), bootstrap.agent_engine(), ENV, 8)
    evaluation = TradingEnv(held, trading_config(), bootstrap.agent_engine(), ENV)
    if kind == "rainbow":
        cfg = msgspec.structs.replace(RainbowConfig(steps=steps, eval_every=steps // 2, learn_start=500), **over)
        trainer = RainbowTrainer(envs, cfg, seed, torch.device(device), evaluation=evaluation, eval_episodes=4,
                                 checkpoint=checkpoint)
    else:
        cfg = msgspec.structs.replace(PpoConfig(steps=steps, eval_every=steps // 2), **over)
        trainer = PpoTrainer(envs, cfg, seed, torch.device(device), evaluation=evaluation, eval_episodes=4,
                             checkpoint=checkpoint)
    return trainer, evaluation


@pytest.mark.parametrize("kind", ["rainbow", "ppo"])
def test_the_agent_learns_a_planted_edge_and_beats_flat_and_random(kind, edge):
    trainer, evaluation = trained(kind, edge, steps=LEARNING_STEPS[kind])
    trainer.run()
    result = compare(evaluation, trainer.policy(), 6, seed=1)
    agent = result["agent"]
    assert agent["pnl_bp"] > 30.0, result  # flat makes 0; the planted edge pays tens of basis points an episode
    assert agent["pnl_bp"] > result["random"]["pnl_bp"] + 100.0
    assert agent["sharpe"] > 0 and agent["turnover"] > 0.02  # it trades on the edge, not one lucky hold


@pytest.mark.parametrize("kind", ["rainbow", "ppo"])
def test_on_a_random_walk_with_fees_the_agent_learns_to_trade_little(kind, no_edge):
    trainer, evaluation = trained(kind, no_edge, steps=LEARNING_STEPS[kind])
    trainer.run()
    result = compare(evaluation, trainer.policy(), 6, seed=1)
    assert result["agent"]["turnover"] < 0.05 * result["random"]["turnover"], result
    assert result["agent"]["pnl_bp"] > result["random"]["pnl_bp"] + 100.0


HASH_SCRIPT = """
import sys
import foxhunt.compiled
foxhunt.compiled.check()
sys.path.insert(0, {root!r})
from tests.ml.test_agents import trained, market, EDGE
from foxhunt.models.forecaster import parameter_hash
trainer, _ = trained({kind!r}, market(12_000, **EDGE), steps=2048, **{over!r})
trainer.run()
print(parameter_hash(trainer.model))
"""


@pytest.mark.parametrize("kind", ["rainbow", "ppo"])
def test_same_seed_same_weights_in_one_process_and_in_two_and_resume_equals_uninterrupted(kind, tmp_path):
    small = market(12_000, **EDGE)
    over = {"learn_start": 256} if kind == "rainbow" else {}
    first, _ = trained(kind, small, steps=2048, **over)
    first.run()
    again, _ = trained(kind, small, steps=2048, **over)
    again.run()
    assert parameter_hash(first.model) == parameter_hash(again.model)

    other = subprocess.run([sys.executable, "-c", HASH_SCRIPT.format(root=str(ROOT), kind=kind, over=over)],
                           capture_output=True, text=True, check=True, cwd=ROOT)
    assert other.stdout.strip().splitlines()[-1] == parameter_hash(first.model)

    checkpoint = tmp_path / f"{kind}.pt"
    stopped, _ = trained(kind, small, steps=2048, checkpoint=checkpoint, **over)

    def stop_inside_the_second_segment(step, record):  # Ctrl-C: the second segment's work is lost
        if step > 1024:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped.run(stop_inside_the_second_segment)
    resumed, _ = trained(kind, small, steps=2048, checkpoint=checkpoint, **over)
    outcome = resumed.run(resume=True)
    assert outcome.resumed_from == 1024
    assert parameter_hash(resumed.model) == parameter_hash(first.model)
    assert outcome.history == first.history


def test_ppo_runs_with_a_gru_and_with_continuous_actions():
    small = market(6_000, **EDGE)
    for over, cfg in (({"cell": "gru"}, ENV), ({}, msgspec.structs.replace(ENV, continuous=True))):
        make_deterministic(1)
        train, held = small.split(0.25)
        envs = VectorTradingEnv(train, trading_config(), bootstrap.agent_engine(), cfg, 4)
        evaluation = TradingEnv(held, trading_config(), bootstrap.agent_engine(), cfg)
        ppo = msgspec.structs.replace(PpoConfig(steps=1024, eval_every=1024, envs=4), **over)
        outcome = PpoTrainer(envs, ppo, 1, torch.device("cpu"), evaluation=evaluation, eval_episodes=2,
                             checkpoint=None).run()
        assert outcome.steps == 1024 and np.isfinite(outcome.history[-1]["value_loss"])


@pytest.mark.parametrize(("cell", "continuous"), [("lstm", False), ("gru", False), ("lstm", True)])
def test_the_acting_ppo_policy_gives_training_s_step_outputs_bit_for_bit(cell, continuous):
    """The served policy (models/greedy.py) runs the cell and the policy head alone: over a sequence its
    outputs and carried state are those of training's step with no sequence start, byte for byte."""
    from foxhunt.models.greedy import GreedyRecurrent
    from foxhunt.models.recurrent import RecurrentActorCritic

    torch.manual_seed(3)
    net = RecurrentActorCritic(msgspec.structs.replace(PpoConfig(), cell=cell), 7, 3, continuous).eval()
    with torch.no_grad():
        net.obs_mean.uniform_(-1.0, 1.0)
        net.obs_scale.uniform_(0.5, 2.0)
        torch.nn.init.normal_(net.policy.weight)  # away from the near-uniform initial policy
    acting = GreedyRecurrent(net, torch.device("cpu"))
    state, starts = net.initial_state(1, torch.device("cpu")), torch.zeros(1)
    for obs in torch.randn(6, 1, 7, generator=torch.Generator().manual_seed(4)):
        with torch.no_grad():
            served = acting.forward(obs)
            out, _, state = net.step(obs, state, starts)
        assert torch.equal(served, out)
        assert torch.equal(acting.state, state)


def test_the_acting_rainbow_policy_gives_the_networks_mean_returns_bit_for_bit():
    """The served Rainbow-IQN (models/greedy.py) embeds its fractions once, at `begin`: its outputs are the
    network's q_values over those fractions, byte for byte, and follow the network after `begin`."""
    from foxhunt.models.greedy import GreedyQuantiles
    from foxhunt.models.iqn import QuantileNetwork

    torch.manual_seed(5)
    net = QuantileNetwork(RainbowConfig(), 7, 3).eval()
    acting = GreedyQuantiles(net, torch.device("cpu"))
    obs = torch.randn(1, 7, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert torch.equal(acting.forward(obs), net.q_values(obs, acting.taus))
        torch.nn.init.normal_(net.embed.weight)  # as training moves the network between evaluations
        acting.begin()
        assert torch.equal(acting.forward(obs), net.q_values(obs, acting.taus))


# --- curiosity ------------------------------------------------------------------------------------------


def test_the_curiosity_bonus_falls_for_what_the_predictor_has_learned_and_stays_for_the_new():
    from foxhunt.training.rl.curiosity import CuriosityBonus

    rng = np.random.default_rng(0)
    width = 15
    bonus = CuriosityBonus(width, 32, (np.zeros(width, np.float32), np.ones(width, np.float32)), 1e-2, 1,
                           torch.device("cpu"))
    familiar = rng.normal(size=(8, width)).astype(np.float32)
    first = bonus(familiar).mean()
    for _ in range(300):
        later = bonus(familiar).mean()
    novel = bonus(rng.normal(loc=3.0, size=(8, width)).astype(np.float32)).mean()
    assert later < 0.2 * first and novel > 5 * later


@pytest.mark.parametrize("kind", ["rainbow", "ppo"])
def test_an_agent_with_curiosity_trains_repeatably_resumes_exactly_and_otherwise_than_without(kind, tmp_path):
    small = market(12_000, **EDGE)
    over = {"learn_start": 256} if kind == "rainbow" else {}
    steps = 1024 if kind == "rainbow" else 2048  # two segments (PPO's of one rollout, 8 x 128 steps)
    hashes = []
    for curiosity in (0.5, 0.5, 0.0):
        trainer, _ = trained(kind, small, steps=steps, curiosity=curiosity, **over)
        outcome = trainer.run()
        hashes.append(parameter_hash(trainer.model))
        assert np.isfinite(outcome.history[-1]["held_out_pnl_bp"])
    assert hashes[0] == hashes[1] != hashes[2]

    stopped, _ = trained(kind, small, steps=steps, curiosity=0.5, checkpoint=tmp_path / "c.pt", **over)

    def stop(step, record):
        if step > steps // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped.run(stop)
    resumed, _ = trained(kind, small, steps=steps, curiosity=0.5, checkpoint=tmp_path / "c.pt", **over)
    assert resumed.run(resume=True).resumed_from == steps // 2 and parameter_hash(resumed.model) == hashes[0]


# --- offline: IQL from journaled trading ----------------------------------------------------------------


def behaviour_episode(m: Market, trading: TradingConfig, seed: int = 0):
    """A long journaled episode of a noisy mean-reversion trader: long after a fall of ret_16 beyond one
    standard deviation, short after a rise, and 30% of its steps a random target. Returns the episode, its
    targets and rewards step by step, and its summary."""
    cfg = msgspec.structs.replace(ENV, episode_steps=10**6)
    e = TradingEnv(m, trading, bootstrap.agent_engine(), cfg, record=True)
    obs, _ = e.reset(options={"start": 0})
    rng = np.random.default_rng(seed)
    spread = float(m.rows[:, 2].std())
    target, targets, rewards = ENV.levels, [], []
    while True:
        if rng.random() < 0.3:
            target = int(rng.integers(ENV.actions))
        elif obs[2] < -spread:
            target = ENV.actions - 1
        elif obs[2] > spread:
            target = 0
        targets.append(target)
        obs, reward, terminated, truncated, info = e.step(target)
        rewards.append(reward)
        if terminated or truncated:
            return e.episode, targets, rewards, info["episode"]


@pytest.mark.postgres
async def test_iql_learns_offline_from_a_journal_of_noisy_trading_and_beats_flat_and_random(edge, pg_dsn,
                                                                                            journal_name):
    from foxhunt.models.agent_configs import IqlConfig
    from foxhunt.training.rl import history
    from foxhunt.training.rl.environment import observation_scale
    from foxhunt.training.rl.iql import IqlTrainer

    trading = trading_config()
    episode, targets, rewards, summary = behaviour_episode(edge, trading)
    assert summary["fills"] > 1000
    store = PostgresJournalStore(pg_dsn)
    await write(store, journal_name, episode, trading)
    aligned = msgspec.structs.replace(ENV, warmup=65, episode_steps=10**6)  # the trader's steps: 0, 5, 10, ...
    data = await history.read(store, [journal_name], "EURUSD", config.Config().features, aligned,
                              100_000 * 10**9, 1)
    # the journal's trading, read back: the targets the trader chose and its rewards, from its 13th step on
    # (in basis points of the notional at the first step read, where the episode's were at its first price:
    # the price moved by a few parts in ten thousand between them)
    assert np.array_equal(data.action, np.array(targets[13 : 13 + len(data)]))
    np.testing.assert_allclose(data.reward, np.array(rewards[13 : 13 + len(data)]), rtol=2e-3, atol=1e-3)
    data = await history.read(store, [journal_name], "EURUSD", config.Config().features, ENV, 100_000 * 10**9, 1)

    make_deterministic(1)
    train, held = edge.split(0.25)
    judge = TradingEnv(held, trading, bootstrap.agent_engine(), ENV)
    part = data.within(train.data[0].ts_event, held.data[0].ts_event)
    assert 0 < len(part) < len(data)
    trainer = IqlTrainer(part, IqlConfig(steps=3000, eval_every=1500), 5, torch.device("cpu"), observation_scale(train),
                         evaluation=judge, eval_episodes=4, checkpoint=None)
    trainer.run()
    result = compare(judge, trainer.policy(), 6, seed=1)
    assert result["agent"]["pnl_bp"] > 30.0 and result["agent"]["pnl_bp"] > result["random"]["pnl_bp"] + 100.0, result


def test_an_agent_as_a_tunes_trial_reports_each_evaluation_with_a_checkpoint_and_leaves_its_model(tmp_path):
    from foxhunt.training.trainables import AgentTrainable, trained

    cfg = config.override(config.load(None, {}), [
        "agents.env.episode_steps=300", "agents.env.decision_every=5", "agents.rainbow.steps=512",
        "agents.rainbow.eval_every=256", "agents.rainbow.learn_start=128"])
    trial = AgentTrainable(cfg, "rainbow", "EURUSD", "tiny", "cpu", ("synthetic",), market(6_000, **EDGE), None,
                           bootstrap.agent_engine)
    reports: list[tuple[dict, bool]] = []
    first = trial(("agents.rainbow.learning_rate=0.0005",), 3, lambda m, checkpoint=False: reports.append((m, checkpoint)),
                  tmp_path)
    assert [(m["step"], saved) for m, saved in reports] == [(256, True), (512, True)]
    assert first["held_out_pnl_bp"] == reports[-1][0]["held_out_pnl_bp"] and "random_pnl_bp" in first
    stored = trained(tmp_path)
    assert stored.ids() == [first["model"]]
    manifest = json.loads(stored.get(first["model"])["manifest.json"])
    assert manifest["config"]["learning_rate"] == 0.0005 and manifest["seed"] == 3
    again = trial(("agents.rainbow.learning_rate=0.0005",), 3, lambda m, checkpoint=False: None, tmp_path)
    assert again["model"] == first["model"]  # its checkpoint in the working directory: resumed, the same weights
