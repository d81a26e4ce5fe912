"""`foxhunt train rainbow|ppo|iql` and `foxhunt models eval` of an agent, from the journals to the stored
agent: read one symbol's market data (and, for IQL, which learns offline, the journals' trading of it:
training/rl/history.py), keep the last part for evaluation, make torch deterministic, train (in the trading
environment, or on the journals' transitions before the held-out part), resuming from the run's
checkpoint if asked, compare the agent with the flat, buy-and-hold and random policies on the held-out
part, and store the weights with their manifest.

An agent trades through the strategy `agent` (core/strategies/agent.py) whatever strategy the daemon is
configured to run: the rest of the trading configuration (instruments, risk limits, the simulated
venue's fees) is the configured one, and the manifest records it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import torch
from torch import nn

import foxhunt
from foxhunt.config import Config, TradingConfig
from foxhunt.heap import YOUNG_WHILE_TRAINING, started_heap_frozen
from foxhunt.messages.base import nanos
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.models.artifact import AgentShape, FeatureSetRef, Manifest, model_id, pack
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import parameter_hash
from foxhunt.models.greedy import Greedy, greedy
from foxhunt.ports import JournalStore, ModelStore
from foxhunt.training.rl import evaluation, iql, ppo, rainbow
from foxhunt.training.rl import history as journal_history
from foxhunt.training.rl.environment import TradingEnv, VectorTradingEnv, observation_scale
from foxhunt.training.rl.episode import Engine, Episode
from foxhunt.training.rl.history import Transitions
from foxhunt.training.rl.market import Market, read
from foxhunt.training.rl.segments import Progress, Segmented
from foxhunt.training.train import Trained, device


class AgentRequest(NamedTuple):
    agent: str  # rainbow or ppo
    journals: list[str]
    symbol: str
    start_ns: int | None
    end_ns: int | None
    seed: int
    device: str
    size: str
    resume: bool


def agent_trading(cfg: Config) -> TradingConfig:
    """The configured trading, with the strategy that trades on an agent's decisions."""
    strategy = msgspec.structs.replace(cfg.strategy, name="agent")
    return msgspec.structs.replace(cfg.trading(), strategy=strategy)


async def market(store: JournalStore, request: AgentRequest, cfg: Config) -> Market:
    """The symbol's market data in the journals: what an agent trades in, and is evaluated on."""
    return await read(store, request.journals, request.symbol, cfg.features, request.start_ns, request.end_ns)


async def history(store: JournalStore, request: AgentRequest, cfg: Config) -> Transitions:
    """The journals' trading of the symbol as transitions: what IQL learns from (training/rl/history.py)."""
    trading = agent_trading(cfg)
    size, inst = nanos(trading.strategy.agent.trade_size), trading.build_instruments()[request.symbol]
    return await journal_history.read(store, request.journals, request.symbol, cfg.features, cfg.agents.env, size,
                                      inst.multiplier)


def run_key(request: AgentRequest, cfg: Config, market: Market) -> str:
    """What names a training run's checkpoint: everything that decides its weights."""
    body = msgspec.json.encode({
        "agent": request.agent, "size": request.size, "seed": request.seed, "device": request.device,
        "features": cfg.features.digest(), "agents": cfg.agents, "trading": agent_trading(cfg).digest(),
        "source": market.source, "events": len(market), "range": [request.start_ns, request.end_ns],
    }, order="sorted")
    return hashlib.sha256(body).hexdigest()[:20]


def train(market: Market, request: AgentRequest, cfg: Config, models: ModelStore, engine: Engine,
          checkpoints: Path, progress: Progress | None = None, transitions: Transitions | None = None) -> Trained:
    switches = make_deterministic(cfg.agents.threads)  # before any CUDA work
    where = device(request.device)
    trading = agent_trading(cfg)
    agent_cfg = cfg.agents.agent(request.agent, request.size)  # type: ignore[arg-type]
    env_cfg = cfg.agents.env
    train_part, held_out = market.split(env_cfg.held_out_fraction)
    judge = TradingEnv(held_out, trading, engine, env_cfg, policy_id=request.agent)
    segments = {"evaluation": judge, "eval_episodes": cfg.agents.eval_episodes,
                "checkpoint": checkpoints / f"{request.agent}-{run_key(request, cfg, market)}.pt"}
    trainer: Segmented
    if request.agent == "iql":
        assert transitions is not None
        data = transitions.within(train_part.data[0].ts_event, held_out.data[0].ts_event)
        trainer = iql.IqlTrainer(data, agent_cfg, request.seed, where, observation_scale(train_part), **segments)
        width = data.obs.shape[1]
        learned_from = {"transitions": len(data), "source": data.source}
    else:
        envs = VectorTradingEnv(train_part, trading, engine, env_cfg, agent_cfg.envs, policy_id=request.agent)
        trainer_type = rainbow.RainbowTrainer if request.agent == "rainbow" else ppo.PpoTrainer
        trainer = trainer_type(envs, agent_cfg, request.seed, where, **segments)
        width = envs.core.width
        learned_from = {"train": train_part.source}
    # what the training holds from its start out of the collector's full passes, its youngest objects collected
    # less often
    with started_heap_frozen(young=YOUNG_WHILE_TRAINING):
        outcome = trainer.run(progress, resume=request.resume)
    held = evaluation.compare(judge, policy(outcome.model), cfg.agents.eval_episodes, request.seed)
    training = {"journals": [{"journal": name} for name in request.journals], "symbol": request.symbol,
                "from_ns": request.start_ns, "to_ns": request.end_ns, **learned_from, "held_out": held_out.source,
                "steps": outcome.steps, "resumed_from": outcome.resumed_from, "history": outcome.history}
    sha = parameter_hash(outcome.model)
    manifest = Manifest(
        model_id=model_id(request.agent, sha), arch=request.agent, size=request.size,
        config=msgspec.to_builtins(agent_cfg), seed=request.seed,
        feature_set=FeatureSetRef(name=cfg.features.name, version=cfg.features.version,
                                  digest=cfg.features.digest(), spec=msgspec.to_builtins(cfg.features)),
        parameter_sha256=sha,
        training=training,
        determinism=switches, environment=fingerprint(where) | {"foxhunt": foxhunt.__version__},
        metrics={"held_out": held}, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        agent=AgentShape(observations=width, actions=env_cfg.actions, continuous=env_cfg.continuous,
                         symbol=request.symbol, env=msgspec.to_builtins(env_cfg),
                         trading=msgspec.json.decode(trading.to_json())),
    )
    return Trained(manifest, models.put(manifest.model_id, pack(outcome.model, manifest)))


def policy(net: nn.Module) -> Greedy:
    """A network as evaluation plays it, greedily, on the CPU."""
    return greedy(net, torch.device("cpu"))


def trained_in(manifest: Manifest, market: Market, engine: Engine, record: bool = False) -> TradingEnv:
    """The environment a stored agent was trained in (its manifest's), on `market`; its decisions carry the
    agent's id and parameter hash."""
    assert manifest.agent is not None
    env_cfg = msgspec.convert(manifest.agent.env, EnvConfig)
    trading = msgspec.convert(manifest.agent.trading, TradingConfig)
    env = TradingEnv(market, trading, engine, env_cfg, policy_id=manifest.model_id, record=record)
    env.parameter_sha256 = manifest.parameter_sha256
    return env


def evaluate(net: nn.Module, manifest: Manifest, market: Market, engine: Engine, episodes: int
             ) -> dict[str, dict[str, float]]:
    """The stored agent and the baselines on `market` (all of it), in the environment it was trained in."""
    return evaluation.compare(trained_in(manifest, market, engine), policy(net), episodes, manifest.seed)


def record_episode(net: nn.Module, manifest: Manifest, market: Market, engine: Engine) -> Episode:
    """One evaluation episode of the agent on `market`, every record kept: what `foxhunt train --record`
    writes into a journal, to verify like any run."""
    env = trained_in(manifest, market, engine, record=True)
    evaluation.play(env, policy(net), 1)
    assert env.episode is not None
    return env.episode


def summary(m: Manifest) -> dict[str, Any]:
    """What `foxhunt train` prints of an agent's manifest."""
    return {"model": m.model_id, "parameters": m.parameter_sha256, "steps": m.training["steps"],
            "symbol": m.training["symbol"], "held out": m.training["held_out"]}
