"""Training speed of both agents at production size on a GPU, each update graph-captured against eager, and
the determinism hashes of two runs.

    python bench/train_agents_gpu.py [--device cuda] [--size production] [--steps 24576] [--ppo-steps 32768]
                                     [--updates 500] [--ppo-updates 64] [--quotes 200000]

For each agent (the production presets of models/agent_configs.py, on the mean-reverting synthetic market
of tests/ml/test_agents.py):
- `updates_per_second`: the update alone, timed over `--updates` updates after a warm-up (Rainbow: one
  prioritised batch of 256 through the online and target networks, the loss, backward and Adam; PPO: one
  minibatch of 8 environments x 256 steps re-run through the LSTM in chunks of 32, backward and Adam;
  `--ppo-updates` of those), the host-to-device copies of the batch included;
- `env_steps_per_second`: a whole training run of `--steps` environment steps (64 environments stepping
  through the kernel on the CPU, acting, storing, updating), without the evaluations;
- `parameter_sha256`: the weights after that run, twice with graphs and once eager: the three must agree,
  since a graph replays the very kernels eager launches.
The results print as one JSON object.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import json
import time

import msgspec
import torch

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.models.agent_configs import AgentsConfig, EnvConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import parameter_hash
from foxhunt.runtime.clock import EventClock
from foxhunt.training.rl.environment import TradingEnv, VectorTradingEnv
from foxhunt.training.rl.market import Market
from foxhunt.training.rl.ppo import PpoTrainer
from foxhunt.training.rl.rainbow import RainbowTrainer

ENV = EnvConfig(episode_steps=2000, decision_every=5)


def setting(quotes: int):
    cfg = config.load(None, {})
    trading = msgspec.structs.replace(cfg, strategy=msgspec.convert({"name": "agent"}, type(cfg.strategy))).trading()
    feed = SyntheticFeed(3, quotes, trading.build_instruments()["EURUSD"], 1_100_000_000, EventClock(), None, 0.05, 20)
    return trading, Market.of("EURUSD", list(feed), cfg.features, "synthetic")


def trainer(kind: str, trading, market: Market, device: torch.device, graph: bool, steps: int, size: str):
    cfg = msgspec.structs.replace(AgentsConfig().agent(kind, size), steps=steps, eval_every=steps, graph=graph)
    train, held = market.split(0.2)
    envs = VectorTradingEnv(train, trading, bootstrap.agent_engine(), ENV, cfg.envs)
    judge = TradingEnv(held, trading, bootstrap.agent_engine(), ENV)
    kind_type = RainbowTrainer if kind == "rainbow" else PpoTrainer
    return kind_type(envs, cfg, 7, device, evaluation=judge, eval_episodes=1, checkpoint=None)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_updates(kind: str, t, device: torch.device, updates: int) -> float:
    if kind == "rainbow":
        t.train_segment(t.cfg.learn_start + t.cfg.envs * 64, 1, None)  # fill the memory past learn_start
        for _ in range(20):
            t.update()
        sync(device)
        started = time.perf_counter()
        for _ in range(updates):
            t.update()
        sync(device)
        return updates / (time.perf_counter() - started)
    obs, _ = t.envs.reset(seed=1)
    obs = torch.from_numpy(obs).to(device)
    n = t.envs.num_envs
    batch, *_ = t._rollout(obs, t.net.initial_state(n, device), torch.ones(n, device=device))
    t._learn(batch)  # capture (graph) or warm up (eager)
    per_learn = t.cfg.epochs * t.cfg.minibatches
    rounds = max(updates // per_learn, 1)
    sync(device)
    started = time.perf_counter()
    for _ in range(rounds):
        t._learn(batch)
    sync(device)
    return rounds * per_learn / (time.perf_counter() - started)


def run(kind: str, trading, market, device: torch.device, graph: bool, steps: int, size: str) -> tuple[float, str]:
    t = trainer(kind, trading, market, device, graph, steps, size)
    started = time.perf_counter()
    t.train_segment(steps, 11, None)
    sync(device)
    seconds = time.perf_counter() - started
    return t.steps / seconds, parameter_hash(t.model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", choices=["tiny", "production"], default="production")
    parser.add_argument("--steps", type=int, default=24_576)
    parser.add_argument("--ppo-steps", type=int, default=32_768)
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--ppo-updates", type=int, default=64)
    parser.add_argument("--quotes", type=int, default=200_000)
    args = parser.parse_args()
    switches = make_deterministic(1)
    device = torch.device(args.device)
    trading, market = setting(args.quotes)
    out: dict = {"environment": fingerprint(device), "determinism": switches}
    for kind in ("rainbow", "ppo"):
        result: dict = {}
        for mode, graph in (("graph", True), ("eager", False)):
            t = trainer(kind, trading, market, device, graph, args.steps, args.size)
            updates = args.updates if kind == "rainbow" else args.ppo_updates
            result[f"updates_per_second_{mode}"] = round(time_updates(kind, t, device, updates), 1)
            print(json.dumps({kind: {mode: result[f"updates_per_second_{mode}"]}}), flush=True)
        hashes = {}
        steps = args.steps if kind == "rainbow" else args.ppo_steps
        for label, graph in (("graph_1", True), ("graph_2", True), ("eager", False)):
            rate, digest = run(kind, trading, market, device, graph, steps, args.size)
            result[f"env_steps_per_second_{label}"] = round(rate)
            hashes[label] = digest
            print(json.dumps({kind: {label: [round(rate), digest]}}), flush=True)
        result["parameter_sha256"] = hashes
        result["identical"] = len(set(hashes.values())) == 1
        result["update_speedup_graph_over_eager"] = round(result["updates_per_second_graph"]
                                                          / result["updates_per_second_eager"], 2)
        out[kind] = result
        print(json.dumps({kind: result}), flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
