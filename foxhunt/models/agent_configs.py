"""The configurations of the trading environment and of the reinforcement-learning agents that train in it:
frozen Structs with no torch in them, so that foxhunt.config can hold them (`[agents]`) and a manifest can
record them.

As with the forecasters, each agent has two presets, `tiny` (CPU tests, seconds) and `production` (the
GPU), and `[agents.rainbow]` or `[agents.ppo]` change single values of the chosen one.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec
import numpy as np

from foxhunt.errors import ConfigError

AGENTS = ("rainbow", "ppo", "iql")
Size = Literal["tiny", "production"]


class _Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    def __post_init__(self) -> None:
        """Counts are positive; rates and fractions in their ranges (the `_RANGES` of each class)."""
        for name, (low, high) in getattr(self, "_RANGES", {}).items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}], got {value}")


class EnvConfig(_Config, frozen=True, kw_only=True):
    """The trading environment (training/rl/environment.py). A step is `decision_every` market data events
    of the symbol; an episode at most `episode_steps` steps, starting at a seeded random event at least
    `warmup` events in (so the features have their history). The discrete actions are the target positions
    -1, ..., 0, ..., 1 in `levels` steps each side (fractions of the agent strategy's trade_size); with
    `continuous` one number in [-1, 1]. The reward is the change in equity (fills at the touch, marks at
    the mid, commissions charged: spread and fees both count) in basis points of the full position's
    notional at the first price, less `risk_penalty` times the squared fraction held. The last
    `held_out_fraction` of the data is kept for evaluation."""

    _RANGES = {"episode_steps": (1, 10**9), "decision_every": (1, 10**6), "levels": (1, 100), "warmup": (0, 10**6),
               "risk_penalty": (0.0, 1e6), "held_out_fraction": (0.0, 0.9)}

    episode_steps: int = 2000
    decision_every: int = 1
    levels: int = 2
    continuous: bool = False
    risk_penalty: float = 0.0
    warmup: int = 64
    held_out_fraction: float = 0.2

    @property
    def actions(self) -> int:
        return 2 * self.levels + 1


EXTRA = 4  # observation values after the feature row: position, unrealised PnL, equity, denied
# what an agent divides those four by to normalise them: a fraction, basis points, basis points, a flag
EXTRA_SCALE = (1.0, 10.0, 100.0, 1.0)


def notional(price: int, size: int, multiplier: int) -> int:
    """The full position's notional at `price` (nanos), in money nanos, at least 1: what an agent's PnL and
    equity are basis points of (`size` units, nanos; the instrument's `multiplier`)."""
    return max(price * size // 10**9 * multiplier, 1)


def observe(out: np.ndarray, row: np.ndarray, position: int, size: int, unrealized: int, equity: int, notional: int,
            denied: bool) -> None:
    """What an agent observes, into `out` (float32, the row's width + EXTRA), in training (the trading
    environment) and served live (runtime/policies.py) alike: the feature row, then the position as a
    fraction of trade size `size`, the unrealised PnL and the equity since the start (money nanos) in basis
    points of `notional` (the full position's notional at the first price), and 1.0 where the gate denied
    an order since the last decision."""
    width = row.shape[0]
    out[:width] = row
    out[width:] = extras(position, size, unrealized, equity, notional, denied)


def extras(position: int, size: int, unrealized: int, equity: int, notional: int,
           denied: bool) -> tuple[float, float, float, float]:
    """The EXTRA values of an observation after its feature row (`observe`), as float64: a vector of
    episodes gathers them into one array."""
    bp = 1e4 / notional
    return position / size, unrealized * bp, equity * bp, 1.0 if denied else 0.0


def fraction_of(action: Any, cfg: EnvConfig) -> tuple[float, float]:
    """(target fraction, the action as a number) of a discrete action index or a continuous value."""
    if cfg.continuous:
        value = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        if not math.isfinite(value):
            raise ValueError(f"a continuous action must be a finite number, got {value}")
        return min(max(value, -1.0), 1.0), value
    index = int(action)
    if not 0 <= index < cfg.actions:
        raise ValueError(f"a discrete action must be in 0..{cfg.actions - 1}, got {action}")
    return (index - cfg.levels) / cfg.levels, float(index)


class RainbowConfig(_Config, frozen=True, kw_only=True):
    """Rainbow (Hessel et al. 2018, AAAI) with an implicit quantile head (Dabney, Ostrovski, Silver and Munos
    2018, ICML): dueling streams, noisy linear layers (sigma0), n-step returns, prioritised replay (alpha,
    beta annealed from beta0 to 1), double-Q targets, the quantile Huber loss (kappa) over `quantiles` x
    `target_quantiles` sampled fractions, `act_quantiles` to act; `envs` environments step together."""

    _RANGES = {"hidden": (1, 65536), "layers": (1, 16), "embedding": (1, 4096), "quantiles": (1, 1024),
               "target_quantiles": (1, 1024), "act_quantiles": (1, 1024), "sigma0": (0.0, 10.0),
               "n_step": (1, 1000), "gamma": (0.0, 1.0), "batch_size": (1, 65536), "buffer": (1, 10**8),
               "learning_rate": (1e-9, 1.0), "adam_eps": (1e-12, 1.0), "target_every": (1, 10**9),
               "alpha": (0.0, 1.0), "beta0": (0.0, 1.0), "kappa": (1e-9, 1e6), "learn_start": (0, 10**9),
               "update_every": (1, 10**6), "envs": (1, 4096), "steps": (1, 10**12), "grad_clip": (1e-9, 1e9),
               "eval_every": (1, 10**12), "curiosity": (0.0, 1e6)}

    hidden: int = 64
    layers: int = 2
    embedding: int = 32  # cosine features of a sampled fraction (IQN's n)
    quantiles: int = 8  # N: fractions sampled for the online network's distribution
    target_quantiles: int = 8  # N'
    act_quantiles: int = 16  # K: fractions averaged to act
    sigma0: float = 0.5
    n_step: int = 3
    gamma: float = 0.95
    batch_size: int = 32
    buffer: int = 50_000
    learning_rate: float = 5e-4
    adam_eps: float = 1.5e-4
    target_every: int = 500  # updates between copies of the online network into the target network
    alpha: float = 0.5
    beta0: float = 0.4
    kappa: float = 1.0
    learn_start: int = 1000  # transitions stored before the first update
    update_every: int = 4  # environment steps (of all envs together) per update
    envs: int = 8
    steps: int = 20_000  # environment steps, all envs together
    grad_clip: float = 10.0
    eval_every: int = 5_000  # environment steps between evaluations on the held-out range (and checkpoints)
    graph: bool = True  # on CUDA, each update replays a CUDA graph of itself (the same bits as eager)
    curiosity: float = 0.0  # the weight of the RND curiosity bonus in the reward (models/rnd.py); 0: none


class PpoConfig(_Config, frozen=True, kw_only=True):
    """PPO (Schulman et al. 2017) with generalised advantage estimation (Schulman et al. 2016, lambda), the
    clipped objective (clip), a clipped value loss (value_clip), an entropy bonus, and a recurrent policy
    (an LSTM, or a GRU) trained by truncated backpropagation through time over `bptt` steps from the hidden
    states stored while acting. Each update: `rollout` steps of `envs` environments, `epochs` passes in
    `minibatches` of whole environment sequences."""

    _RANGES = {"hidden": (1, 65536), "rollout": (1, 10**6), "envs": (1, 4096), "epochs": (1, 1000),
               "minibatches": (1, 4096), "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0), "clip": (0.0, 10.0),
               "value_clip": (0.0, 1e6), "entropy": (0.0, 100.0), "value_coef": (0.0, 100.0),
               "learning_rate": (1e-9, 1.0), "grad_clip": (1e-9, 1e9), "bptt": (1, 10**6), "steps": (1, 10**12),
               "eval_every": (1, 10**12), "curiosity": (0.0, 1e6)}

    cell: Literal["lstm", "gru"] = "lstm"
    hidden: int = 64
    rollout: int = 128
    envs: int = 8
    epochs: int = 4
    minibatches: int = 4
    gamma: float = 0.95
    gae_lambda: float = 0.95
    clip: float = 0.2
    value_clip: float = 0.2
    entropy: float = 0.01
    value_coef: float = 0.5
    learning_rate: float = 1e-3
    grad_clip: float = 0.5
    bptt: int = 16
    steps: int = 20_000  # environment steps, all envs together
    eval_every: int = 5_000
    graph: bool = True  # on CUDA, each minibatch's update replays a CUDA graph of itself (the same bits as eager)
    curiosity: float = 0.0  # the weight of the RND curiosity bonus in the reward (models/rnd.py); 0: none

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rollout % self.bptt:
            raise ValueError(f"rollout ({self.rollout}) must be a multiple of bptt ({self.bptt})")
        if self.envs % self.minibatches:
            raise ValueError(f"envs ({self.envs}) must be a multiple of minibatches ({self.minibatches})")


class IqlConfig(_Config, frozen=True, kw_only=True):
    """Implicit Q-learning (Kostrikov, Nair and Levine 2022, ICLR), offline: from the trading journals
    record, never acting while it learns. `expectile` tau of the value's regression, `temperature` beta of
    the policy's advantage weights, `polyak` the target Qs' step; `steps` gradient steps of `batch_size`
    transitions, evaluated every `eval_every` in the environment on the held-out range."""

    _RANGES = {"hidden": (1, 65536), "layers": (1, 16), "expectile": (0.5, 0.999), "temperature": (0.0, 1e3),
               "gamma": (0.0, 1.0), "polyak": (1e-6, 1.0), "batch_size": (1, 65536),
               "learning_rate": (1e-9, 1.0), "grad_clip": (1e-9, 1e9), "steps": (1, 10**12),
               "eval_every": (1, 10**12)}

    hidden: int = 64
    layers: int = 2
    expectile: float = 0.7
    temperature: float = 3.0
    gamma: float = 0.95
    polyak: float = 0.005
    batch_size: int = 256
    learning_rate: float = 3e-4
    grad_clip: float = 10.0
    steps: int = 5_000  # gradient steps
    eval_every: int = 2_500
    graph: bool = True  # on CUDA, each update replays a CUDA graph of itself (the same bits as eager)


AGENT_CONFIGS: dict[str, type[_Config]] = {"rainbow": RainbowConfig, "ppo": PpoConfig, "iql": IqlConfig}

PRODUCTION: dict[str, dict[str, Any]] = {
    "rainbow": {"hidden": 512, "layers": 3, "embedding": 64, "quantiles": 32, "target_quantiles": 32,
                "act_quantiles": 32, "batch_size": 256, "buffer": 1_000_000, "envs": 64, "steps": 10_000_000,
                "learning_rate": 1e-4, "target_every": 2000, "learn_start": 20_000, "eval_every": 250_000},
    "ppo": {"hidden": 256, "envs": 64, "rollout": 256, "minibatches": 8, "bptt": 32, "steps": 10_000_000,
            "eval_every": 250_000},
    "iql": {"hidden": 512, "layers": 3, "batch_size": 1024, "steps": 1_000_000, "eval_every": 50_000},
}


class AgentsConfig(_Config, frozen=True, kw_only=True):
    """`[agents]`: the environment, each agent's values over its preset, how often and how long to evaluate,
    and torch's CPU threads (fixed: a reduction's order may follow their number)."""

    _RANGES = {"eval_episodes": (1, 10**6), "threads": (1, 4096)}

    env: EnvConfig = EnvConfig()
    rainbow: dict[str, Any] = {}
    ppo: dict[str, Any] = {}
    iql: dict[str, Any] = {}
    eval_episodes: int = 4
    threads: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for agent in AGENTS:
            values = getattr(self, agent)
            if unknown := set(values) - set(AGENT_CONFIGS[agent].__struct_fields__):
                raise ValueError(f"{agent}: unknown setting(s) {sorted(unknown)}; known:"
                                 f" {list(AGENT_CONFIGS[agent].__struct_fields__)}")

    def agent(self, name: str, size: Size) -> Any:
        """The agent's configuration: the preset of `size` with this configuration's values over it
        (ConfigError where it cannot train in the configured environment)."""
        if name in ("rainbow", "iql") and self.env.continuous:
            raise ConfigError(f"agents.env.continuous: {name} chooses among discrete actions; train ppo for a"
                              " continuous target, or set continuous = false")
        values = dict(PRODUCTION[name]) if size == "production" else {}
        values.update(getattr(self, name))
        try:
            return msgspec.convert(values, AGENT_CONFIGS[name])
        except msgspec.ValidationError as e:
            raise ConfigError(f"agents.{name}, over the {size} preset: {e}") from e
