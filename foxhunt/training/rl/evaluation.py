"""Evaluation of a policy on held-out market data, against the policies anyone could follow.

Each evaluation plays the same `episodes` episodes, starting at events spread evenly over the held-out
market (so every policy meets the same prices), and reports per policy:
- `pnl_bp`: the mean final equity of an episode (basis points of the full position's notional at its first
  price; commissions and the spread paid);
- `sharpe`: the mean over the standard deviation of the per-step equity changes of all episodes, times the
  square root of the steps in a year of 365 days of the market's own clock (steps / elapsed ns), the
  convention of a market that trades around the clock; 0 where equity never moved;
- `turnover`: positions traded per step (the sum of |change of position| over trade size, over steps);
- `max_drawdown_bp`: the mean of the episodes' largest drawdowns;
- `fills`, `denials`: per episode.
The baselines: `flat` (never trades), `buy_and_hold` (long trade size throughout) and `random` (a uniformly
drawn action each step from a seeded generator).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from foxhunt.models.agent_configs import EnvConfig
from foxhunt.training.rl.environment import TradingEnv

YEAR_NS = 365 * 86_400 * 10**9


class Policy(Protocol):
    """What evaluation plays: `begin()` before each episode, `act(obs)` for each step (one observation)."""

    def begin(self) -> None: ...

    def act(self, obs: np.ndarray) -> Any: ...


class Constant:
    def __init__(self, action: Any) -> None:
        self.action = action

    def begin(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> Any:
        return self.action


class Random:
    def __init__(self, cfg: EnvConfig, seed: int) -> None:
        self.cfg, self.rng = cfg, np.random.default_rng(seed)

    def begin(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> Any:
        if self.cfg.continuous:
            return self.rng.uniform(-1.0, 1.0, size=1).astype(np.float32)
        return int(self.rng.integers(self.cfg.actions))


def baselines(cfg: EnvConfig, seed: int) -> dict[str, Policy]:
    flat = np.zeros(1, np.float32) if cfg.continuous else cfg.levels
    full = np.ones(1, np.float32) if cfg.continuous else cfg.actions - 1
    return {"flat": Constant(flat), "buy_and_hold": Constant(full), "random": Random(cfg, seed)}


def starts(env: TradingEnv, episodes: int) -> list[int]:
    """Episode starts spread evenly over the market, each with room for a whole episode where it has it."""
    cfg, n = env.core.cfg, len(env.core.market)
    last = max(cfg.warmup, n - 1 - cfg.episode_steps * cfg.decision_every)
    return [int(x) for x in np.linspace(cfg.warmup, last, episodes).round()]


def play(env: TradingEnv, policy: Policy, episodes: int) -> dict[str, float]:
    """The policy's metrics over the evaluation episodes of `env` (a held-out market)."""
    changes: list[float] = []
    ends: list[dict[str, float]] = []
    traded = elapsed = 0.0
    for start in starts(env, episodes):
        obs, _ = env.reset(options={"start": start})
        ep = env.episode
        assert ep is not None
        policy.begin()
        first_ts, held = ep.market.data[ep.index].ts_event, 0.0
        equity = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy.act(obs))
            now = ep.kernel.portfolio.equity
            changes.append((now - equity) * 1e4 / ep.notional)
            equity = now
            position = ep.position / ep.size
            traded += abs(position - held)
            held = position
            if terminated or truncated:
                ends.append(info["episode"])
                break
        elapsed += ep.market.data[ep.index].ts_event - first_ts
    steps = len(changes)
    series = np.asarray(changes)
    std = float(series.std())
    per_year = steps / elapsed * YEAR_NS if elapsed > 0 else 0.0
    mean = lambda key: float(np.mean([e[key] for e in ends]))
    return {
        "pnl_bp": mean("equity_bp"), "sharpe": float(series.mean()) / std * math.sqrt(per_year) if std > 0 else 0.0,
        "turnover": traded / steps if steps else 0.0, "max_drawdown_bp": mean("max_drawdown_bp"),
        "fills": mean("fills"), "denials": mean("denials"), "episodes": float(len(ends)), "steps": float(steps),
    }


def compare(env: TradingEnv, agent: Policy, episodes: int, seed: int,
            on_policy: Callable[[str], None] | None = None) -> dict[str, dict[str, float]]:
    """The agent's metrics and each baseline's, on the same episodes."""
    out = {}
    for name, policy in {"agent": agent, **baselines(env.core.cfg, seed)}.items():
        if on_policy is not None:
            on_policy(name)
        out[name] = play(env, policy, episodes)
    return out
