"""The trading environment: an agent trades one symbol through foxhunt's own kernel, pre-trade gate and
simulated venue, on market data replayed from a journal, with the Gymnasium API.

- An episode (episode.py) is a fresh kernel and venue, built as a backtest builds them (the composition
  root's `Engine`: bootstrap.agent_engine), with the configured strategy `agent` (core/strategies/agent.py),
  risk limits, instruments and venue. It starts at a seeded random event of the market (at least
  `warmup` events in) and runs `episode_steps` steps or to the end of the data.
- A step: the action becomes a target position (a fraction of the agent strategy's trade size), sent to
  the kernel as a journaled PolicyActed input when it changes; the kernel's orders pass the gate and meet
  the simulated venue at once; then the next `decision_every` market data events go through the kernel
  and the venue, as in a backtest.
- The observation: the feature row of the last event (training/rl/market.py), then the position (a
  fraction of trade size), the unrealised PnL and the equity of the episode (basis points of the full
  position's notional), and 1.0 where the gate denied an order in the last step, else 0.0: a denial is
  part of what the agent sees.
- The reward: the change in the kernel's equity over the step (fills at the touch, marks at the mid,
  commissions charged), in basis points of the full position's notional, less `risk_penalty` times the
  squared fraction held. An episode is terminated where trading is HALTED (a breaker or the kill switch:
  the agent can do nothing more), truncated at its length or at the end of the data.
- With `record`, the episode keeps every input and derived event in journal order (episode.py,
  `Episode.records`): `write` puts them into a new journal, which `foxhunt replay --verify` verifies like
  any run.

`VectorTradingEnv` steps many episodes at once (Gymnasium's VectorEnv, resetting an episode that ends in
the same step); its observations for all episodes are one array, filled row by row.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from foxhunt.config import TradingConfig
from foxhunt.errors import ConfigError
from foxhunt.models.agent_configs import EXTRA, EXTRA_SCALE, EnvConfig, fraction_of
from foxhunt.training.rl.episode import Engine, Episode, check
from foxhunt.training.rl.market import Market


class _Core:
    """What TradingEnv and VectorTradingEnv share: a market, a configuration, and how one episode's step
    becomes an observation and a reward."""

    def __init__(self, market: Market, trading: TradingConfig, engine: Engine, cfg: EnvConfig,
                 policy_id: str) -> None:
        check(trading, market.symbol)
        if len(market) < cfg.warmup + 2:
            raise ConfigError(f"{market.source}: {len(market)} events, fewer than warmup ({cfg.warmup}) + 2: too"
                              " few to trade an episode on")
        self.market, self.trading, self.engine, self.cfg, self.policy_id = market, trading, engine, cfg, policy_id
        self.width = market.rows.shape[1] + EXTRA
        big = float(np.finfo(np.float32).max)  # finite bounds: every value is a float32 number, none infinite
        self.observation_space = gym.spaces.Box(-big, big, (self.width,), np.float32)
        self.action_space: gym.Space = (gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if cfg.continuous
                                        else gym.spaces.Discrete(cfg.actions))
        # each discrete action's (fraction, value), fraction_of's: a vector step looks its actions up
        self.discrete = [] if cfg.continuous else [fraction_of(i, cfg) for i in range(cfg.actions)]

    def start(self, rng: np.random.Generator, options: dict | None, record: bool) -> Episode:
        """A new episode from `options["start"]` (an event index), else a random event at least `warmup`
        in, with room for a whole episode where the data has it."""
        cfg, n = self.cfg, len(self.market)
        if options and "start" in options:
            start = int(options["start"])
            if not 0 <= start < n - 1:
                raise ValueError(f"start {start} is outside the market's events 0..{n - 2}")
        else:
            last = max(cfg.warmup, n - 1 - cfg.episode_steps * cfg.decision_every)
            start = int(rng.integers(cfg.warmup, last + 1))
        return Episode(self.market, self.trading, self.engine, cfg, start, self.policy_id, record)

    def observe(self, ep: Episode, out: np.ndarray, denied: bool) -> None:
        out[: self.width - EXTRA] = self.market.rows[ep.index]
        out[self.width - EXTRA :] = ep.extras(denied)

    def step(self, ep: Episode, action: Any, sha: str = "") -> tuple[float, bool, bool, bool]:
        """(reward, terminated, truncated, denied) of one step of `ep` (Episode.step)."""
        fraction, value = fraction_of(action, self.cfg)
        return ep.step(fraction, value, sha)

    def decisions(self, actions: Any) -> list[tuple[float, float]]:
        """(fraction, value) of each of a vector's actions, fraction_of's: an integer array of discrete
        actions in range is looked up at once, anything else (continuous actions, a list, an index out of
        range) goes through fraction_of one by one, which names what is wrong."""
        if self.discrete and isinstance(actions, np.ndarray) and actions.ndim == 1 and actions.dtype.kind in "iu":
            if actions.size and 0 <= actions.min() and actions.max() < len(self.discrete):
                table = self.discrete
                return [table[i] for i in actions.tolist()]
        return [fraction_of(a, self.cfg) for a in actions]


class TradingEnv(gym.Env):
    """One episode at a time, with Gymnasium's API. `record`: every episode keeps its journal records
    (`episode.records`), to be written with `write`."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, market: Market, trading: TradingConfig, engine: Engine, cfg: EnvConfig,
                 policy_id: str = "agent", record: bool = False) -> None:
        self.core = _Core(market, trading, engine, cfg, policy_id)
        self.observation_space = self.core.observation_space
        self.action_space = self.core.action_space
        self.record = record
        self.episode: Episode | None = None
        self.parameter_sha256 = ""  # the policy's weights, journaled with each of its decisions

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.episode = self.core.start(self.np_random, options, self.record)
        obs = np.empty(self.core.width, dtype=np.float32)
        self.core.observe(self.episode, obs, False)
        return obs, {"start": self.episode.index}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.episode is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        ep = self.episode
        reward, terminated, truncated, denied = self.core.step(ep, action, self.parameter_sha256)
        obs = np.empty(self.core.width, dtype=np.float32)
        self.core.observe(ep, obs, denied)
        info: dict[str, Any] = {"denied": denied, "position": ep.position}
        if terminated or truncated:
            info["episode"] = ep.summary()
        return obs, reward, terminated, truncated, info


class VectorTradingEnv(VectorEnv):
    """`num_envs` episodes stepped together, each with its own generator (seeded from `reset`'s seed plus
    its index). An episode that ends is replaced in the same step: `infos["final_obs"]` and
    `infos["episode"]` (a list, None where it did not end) hold what it ended with."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, market: Market, trading: TradingConfig, engine: Engine, cfg: EnvConfig, num_envs: int,
                 policy_id: str = "agent") -> None:
        self.core = core = _Core(market, trading, engine, cfg, policy_id)
        self.num_envs = num_envs
        self.single_observation_space = core.observation_space
        self.single_action_space = core.action_space
        self.observation_space = gym.vector.utils.batch_space(core.observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(core.action_space, num_envs)
        self.episodes: list[Episode] = []
        self.rngs: list[np.random.Generator] = []
        self.obs = np.zeros((num_envs, core.width), dtype=np.float32)
        self.parameter_sha256 = ""

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None or not self.rngs:
            self.rngs = [np.random.default_rng(None if seed is None else [seed, i]) for i in range(self.num_envs)]
        self.episodes = [self.core.start(rng, options, False) for rng in self.rngs]
        for i, ep in enumerate(self.episodes):
            self.core.observe(ep, self.obs[i], False)
        return self.obs.copy(), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        n, core, sha = self.num_envs, self.core, self.parameter_sha256
        decisions = core.decisions(actions)
        if len(decisions) != n:
            raise ValueError(f"{len(decisions)} actions for {n} environments")
        steps = [ep.step(fraction, value, sha) for ep, (fraction, value) in zip(self.episodes, decisions)]
        rewards = np.array([s[0] for s in steps], dtype=np.float64)
        terminated = np.array([s[1] for s in steps], dtype=np.bool_)
        truncated = np.array([s[2] for s in steps], dtype=np.bool_)
        self._observe_all([s[3] for s in steps])
        final_obs: list[np.ndarray | None] = [None] * n
        ended: list[dict | None] = [None] * n
        for i in np.flatnonzero(terminated | truncated):
            ep = self.episodes[i]
            final_obs[i], ended[i] = self.obs[i].copy(), ep.summary()
            self.episodes[i] = ep = core.start(self.rngs[i], None, False)
            core.observe(ep, self.obs[i], False)
        infos: dict[str, Any] = {}
        if any(e is not None for e in ended):
            infos = {"final_obs": final_obs, "episode": ended}
        return self.obs.copy(), rewards, terminated, truncated, infos

    def _observe_all(self, denied: list[bool]) -> None:
        """Every episode's observation into `obs`, as `_Core.observe` makes one: the feature rows gathered
        at once, then the extras."""
        width = self.core.width - EXTRA
        self.obs[:, :width] = self.core.market.rows[[ep.index for ep in self.episodes]]
        self.obs[:, width:] = [ep.extras(d) for ep, d in zip(self.episodes, denied)]


def reached(next_obs: np.ndarray, infos: dict) -> np.ndarray:
    """What each episode of a vector step reached: its next observation, or, where the episode ended and
    a new one began in the same step, the observation it ended on."""
    final = infos.get("final_obs")
    if final is None:
        return next_obs
    return np.stack([f if f is not None else o for f, o in zip(final, next_obs, strict=True)])


def observation_scale(market: Market) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) an agent normalises observations by: the feature rows' mean and standard deviation
    over `market` (its training data; 1 where a feature never varies), then EXTRA_SCALE's fixed scales."""
    rows = market.rows.astype(np.float64)
    std = rows.std(axis=0)
    mean = np.concatenate([rows.mean(axis=0), np.zeros(EXTRA)])
    scale = np.concatenate([np.where(std > 0, std, 1.0), EXTRA_SCALE])
    return mean.astype(np.float32), scale.astype(np.float32)


