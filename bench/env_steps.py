"""Trading environment steps per second on this machine's CPU, one process: foxhunt's environment (every
step through the kernel, the pre-trade gate and the simulated venue) single and vectorised, and side by
side on the same prices gym-anytrading's forex environment (a well-known Gymnasium trading environment
from PyPI: `pip install -e .[bench]`), a pure-numpy bookkeeping of a long/short position without orders.

    .venv/bin/python bench/env_steps.py [--quotes 200000] [--steps 100000] [--envs 64] [--repeats 5] [--unfrozen]

Policies: `random` (a uniformly drawn action every step: an order on most steps, about 0.8 position traded
per step), `every10` (a new random target every 10 steps: about the 0.1 to 0.2 positions per step the
trained agents of tests/ml/test_agents.py trade on a market with an edge) and `hold` (a fixed long: one
order an episode, what they converge to on a market without one). foxhunt's steps are one market data
event each (decision_every = 1). The runs interleave, `--repeats` times each, and the medians and their
ratios are printed; what the runs before left behind is collected before each. They run with the heap the
process holds once the market is built (the imports and the market) out of the garbage collector's full
passes and its youngest objects collected less often, as `foxhunt train` steps its environments
(foxhunt/heap.py); `--unfrozen` leaves both as the interpreter has them.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import contextlib
import gc
import json
import statistics
import time

import msgspec
import numpy as np

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.heap import YOUNG_WHILE_TRAINING, started_heap_frozen
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.runtime.clock import EventClock
from foxhunt.training.rl.environment import TradingEnv, VectorTradingEnv
from foxhunt.training.rl.market import Market


def setting(quotes: int):
    cfg = config.load(None, {})
    trading = msgspec.structs.replace(cfg, strategy=msgspec.convert({"name": "agent"}, type(cfg.strategy))).trading()
    feed = SyntheticFeed(3, quotes, trading.build_instruments()["EURUSD"], 1_100_000_000, EventClock(), None, 0.05, 20)
    return trading, Market.of("EURUSD", list(feed), cfg.features, "synthetic")


POLICIES = ("random", "every10", "hold")


def actions(policy: str, n: int, shape: tuple[int, ...] = ()) -> np.ndarray:
    if policy == "hold":
        return np.full((n, *shape), 4, dtype=np.int64)
    drawn = np.random.default_rng(0).integers(0, 5, size=(n, *shape))
    return drawn if policy == "random" else np.repeat(drawn[::10], 10, axis=0)[:n]


def steps_per_second(env, acts: list) -> float:
    """One Gymnasium environment through `acts`, starting again where an episode ends."""
    env.reset(seed=1)
    started = time.perf_counter()
    for a in acts:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    return len(acts) / (time.perf_counter() - started)


def foxhunt_single(trading, market, policy: str, steps: int) -> float:
    env = TradingEnv(market, trading, bootstrap.agent_engine(), EnvConfig(episode_steps=10_000))
    return steps_per_second(env, actions(policy, steps).tolist())


def foxhunt_vector(trading, market, policy: str, steps: int, envs: int) -> float:
    env = VectorTradingEnv(market, trading, bootstrap.agent_engine(), EnvConfig(episode_steps=10_000), envs)
    env.reset(seed=1)
    acts = actions(policy, steps // envs, (envs,))
    started = time.perf_counter()
    for a in acts:
        env.step(a)
    return acts.size / (time.perf_counter() - started)


def anytrading(market, policy: str, steps: int) -> float:
    import pandas as pd
    from gym_anytrading.envs import ForexEnv

    mids = np.array([(q.bid + q.ask) / 2e9 for q in market.data])
    frame = pd.DataFrame({"Close": mids})
    env = ForexEnv(frame, window_size=10, frame_bound=(10, len(mids)))
    acts = actions(policy, steps) % 2 if policy != "hold" else np.ones(steps, dtype=np.int64)
    return steps_per_second(env, acts.tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quotes", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--unfrozen", action="store_true",
                        help="leave the start's heap in the collector's full passes and its threshold as it is"
                             " (foxhunt train freezes the heap and raises the threshold)")
    args = parser.parse_args()
    trading, market = setting(args.quotes)
    with contextlib.nullcontext() if args.unfrozen else started_heap_frozen(young=YOUNG_WHILE_TRAINING):
        out = measure(args, trading, market)
    print(json.dumps(out | {"heap": "unfrozen" if args.unfrozen else "frozen"}, indent=1))


def measure(args: argparse.Namespace, trading, market) -> dict:
    runs = {
        f"{policy} {kind}": fn
        for policy in POLICIES
        for kind, fn in (
            ("foxhunt single", lambda p=policy: foxhunt_single(trading, market, p, args.steps)),
            (f"foxhunt vector x{args.envs}",
             lambda p=policy: foxhunt_vector(trading, market, p, args.steps, args.envs)),
            ("gym-anytrading forex", lambda p=policy: anytrading(market, p, args.steps)),
        )
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            gc.collect()  # the runs before left their environments' kernels behind, cyclic garbage: not this run's
            samples[name].append(fn())
    medians = {name: statistics.median(v) for name, v in samples.items()}
    out = {"compiled": compiled.compiled_in_use(), "steps_per_second": {k: round(v) for k, v in medians.items()}}
    for policy in POLICIES:
        anchor = medians[f"{policy} gym-anytrading forex"]
        out[f"{policy} ratios to gym-anytrading"] = {
            k.removeprefix(f"{policy} "): round(v / anchor, 3) for k, v in medians.items() if k.startswith(policy)}
    return out


if __name__ == "__main__":
    main()
