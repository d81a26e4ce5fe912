"""Instructions per step of the trading environment, vectorised, counted by valgrind: env_steps.py's
measure without the noise.

A step's rate here wanders by 10 to 20% from one minute to the next (docs/benchmarks.md), which hides
the few per cent that one change to the order path buys. valgrind's callgrind counts the instructions
the process executes instead, the same for the same code and inputs whatever else the machine does. This
steps env_steps.py's vectorised environment (64 episodes, one market data event a step, every step
through the kernel, the agent strategy, the pre-trade gate and the simulated venue) under callgrind
twice, `--small` and `--large` steps of each episode, and prints the difference per environment step, so
start-up, imports and the market's making cancel out. Compare two commits by running it in each.

    .venv/bin/python bench/env_instructions.py [--policy random|every10|hold] [--small 50] [--large 200]

Needs valgrind (`apt-get install valgrind`). About five minutes: each counted process builds a market of
30,000 quotes under valgrind first.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse

import callgrind
from env_steps import actions, setting

from foxhunt import bootstrap
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.training.rl.environment import VectorTradingEnv

ENVS = 64


def run(policy: str, steps: int) -> None:
    """`steps` steps of each of ENVS episodes, as foxhunt_vector in env_steps.py steps them."""
    trading, market = setting(30_000)
    env = VectorTradingEnv(market, trading, bootstrap.agent_engine(), EnvConfig(episode_steps=10_000), ENVS)
    env.reset(seed=1)
    for a in actions(policy, steps, (ENVS,)):
        env.step(a)


def count(policy: str, steps: int) -> int:
    return callgrind.count(__file__, "--policy", policy, "--run", str(steps))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="random", help="random, every10 or hold (env_steps.py)")
    parser.add_argument("--small", type=int, default=50, help="steps of each episode in the first count")
    parser.add_argument("--large", type=int, default=200, help="and in the second")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the process valgrind counts
    args = parser.parse_args()
    if args.run is not None:
        return run(args.policy, args.run)
    callgrind.require_valgrind()
    count(args.policy, args.small)  # a first run fills numba's cache of the risk kernels
    small, large = count(args.policy, args.small), count(args.policy, args.large)
    per_step = (large - small) / ((args.large - args.small) * ENVS)
    how = "compiled" if compiled.compiled_in_use() else "as Python"
    print(f"{args.policy}: {per_step:,.0f} instructions per environment step"
          f" ({(args.large - args.small) * ENVS} steps counted, {ENVS} environments, {how})")


if __name__ == "__main__":
    main()
