"""The trading environment: an agent trades one symbol through foxhunt's own kernel, pre-trade gate and
simulated venue, on market data replayed from a journal, with the Gymnasium API.

- An episode is a fresh kernel and venue, built as a backtest builds them (the composition root's
  `Engine`: bootstrap.agent_engine), with the configured strategy `agent` (core/strategies/agent.py),
  risk limits, instruments and venue. It starts at a seeded random event of the market (at least
  `warmup` events in) and runs `episode_steps` steps or to the end of the data.
- A step: the action becomes a target position (a fraction of the agent strategy's trade size), sent to
  the kernel as a journaled PolicyActed input when it changes; the kernel's orders pass the gate and meet
  the simulated venue at once; then the next `decision_every` market data events go through the kernel
  and the venue, as in a backtest.
- The observation: the feature row of the last event (training/rl/market.py), then the position (a
  fraction of trade size), the unrealised PnL and the equity of the episode (basis points of the full
  position's notional), and 1.0 where the gate denied or the venue rejected an order in the last step,
  else 0.0: a denial is part of what the agent sees.
- The reward: the change in the kernel's equity over the step (fills at the touch, marks at the mid,
  commissions charged), in basis points of the full position's notional, less `risk_penalty` times the
  squared fraction held. An episode is terminated where trading is HALTED (a breaker or the kill switch:
  the agent can do nothing more), truncated at its length or at the end of the data.
- With `record`, the episode keeps every input and derived event in journal order (`Episode.records`):
  `write` puts them into a new journal, which `foxhunt replay --verify` verifies like any run.

`VectorTradingEnv` steps many episodes at once (Gymnasium's VectorEnv, resetting an episode that ends in
the same step); its observations for all episodes are one array, filled row by row.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from foxhunt.config import TradingConfig
from foxhunt.core.kernel import Kernel
from foxhunt.errors import ConfigError, JournalMismatch, JournalNotFound
from foxhunt.messages.base import Derived, Input, Message, nanos
from foxhunt.messages.market import Bar, MarketData, QuoteTick, TradeTick
from foxhunt.messages.scores import PolicyActed
from foxhunt.messages.system import RunStarted, TradingState
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.ports import Clock, JournalStore, Venue
from foxhunt.training.rl.market import Market

EXTRA = 4  # observation values after the feature row: position, unrealised PnL, equity, denied
# what an agent divides those four by to normalise them: a fraction, basis points, basis points, a flag
EXTRA_SCALE = (1.0, 10.0, 100.0, 1.0)
_HALTED = TradingState.HALTED


class MarketClock(Clock, Protocol):
    """A clock that tells the market's time: the episode moves it to each input's (runtime/clock.py's
    EventClock, a backtest's clock)."""

    def advance(self, ts: int) -> None: ...


class Engine(NamedTuple):
    """How an episode gets its kernel, its simulated venue and its clock (the market's time, as a
    backtest's), and where it runs (RunStarted's fingerprint): the composition root's choice
    (bootstrap.agent_engine)."""

    kernel: Callable[[TradingConfig], Kernel]
    venue: Callable[[Kernel, TradingConfig, Clock], Venue]
    clock: Callable[[], MarketClock]
    fingerprint: dict[str, str]


def check(trading: TradingConfig, symbol: str) -> None:
    """ConfigError where the configuration cannot run an agent on `symbol`."""
    if trading.strategy.name != "agent":
        raise ConfigError(f"an agent trades through the strategy 'agent'; the configuration runs"
                          f" {trading.strategy.name!r}: set strategy.name = \"agent\"")
    if symbol not in trading.instruments:
        raise ConfigError(f"{symbol} is not a configured instrument (instruments.{symbol}: tick_size, lot_size,"
                          " currency)")


class Episode:
    """One episode's kernel and venue, driven synchronously: what the trading loop does in a backtest, in
    the same order, without the journal's I/O (the records are kept in memory where asked)."""

    def __init__(self, market: Market, trading: TradingConfig, engine: Engine, cfg: EnvConfig, start: int,
                 policy_id: str, record: bool = False) -> None:
        self.market, self.cfg, self.policy_id = market, cfg, policy_id
        self.symbol = market.symbol
        self.kernel = kernel = engine.kernel(trading)
        self.clock = engine.clock()
        self.venue = engine.venue(kernel, trading, self.clock)
        self.records: list[tuple[Message, int | None]] | None = [] if record else None
        self.seq = 0
        self.seen_seq = 0  # the sequence number of the market data event the agent last saw
        self.index = start  # its index in the market
        self.steps = 0
        self.fraction = 0.0  # what the agent last asked for
        self.size = nanos(trading.strategy.agent.trade_size)
        first = market.data[start]
        # the full position's notional at the first price, in money nanos: rewards are basis points of it
        inst = kernel.instruments[self.symbol]
        self.notional = max(_price(first) * self.size // 10**9 * inst.multiplier, 1)
        self.clock.advance(first.ts_init)
        self._take(RunStarted(ts_event=first.ts_event, ts_init=first.ts_init, run_id=1, seed=trading.seed,
                              config_digest=trading.digest(), config=trading.to_json(),
                              fingerprint=engine.fingerprint, clock="replay"))
        for connected in self.venue.connect():
            self._take(connected)
        self._market(first)

    # --- the loop: the trading loop's order (runtime/loop.py), without its I/O ------------------------

    def _handle(self, msg: Input, pending: deque[Input]) -> None:
        """One input through the kernel; the venue's answers to its commands join `pending`."""
        self.seq += 1
        seq = self.seq
        step = self.kernel.handle(seq, msg)
        if step.derived:
            self._derived(msg, seq, step.derived)
        elif self.records is not None:
            self.records.append((msg, None))
        for cmd in step.commands:
            pending.extend(self.venue.send(cmd))

    def _derived(self, msg: Input, seq: int, derived: Sequence[Derived]) -> None:
        """The events the input `seq` derived take the sequence numbers after it, as in a journal."""
        self.seq += len(derived)
        if self.records is not None:
            self.records.append((msg, None))
            self.records.extend((e, seq) for e in derived)

    def _take(self, msg: Input) -> None:
        """An input, and everything it sets off, to the end."""
        pending: deque[Input] = deque()
        self._handle(msg, pending)
        while pending:
            self._handle(pending.popleft(), pending)

    def _market(self, msg: MarketData) -> None:
        """Market data: the kernel sees it, the venue matches its resting orders against it, then the
        kernel's commands go to the venue, and the venue's reports through the kernel, in that order."""
        self.clock.advance(msg.ts_init)
        self.seq += 1
        seq = self.seen_seq = self.seq
        step = self.kernel.handle(seq, msg)
        if step.derived:
            self._derived(msg, seq, step.derived)
        elif self.records is not None:
            self.records.append((msg, None))
        reports = self.venue.on_market(msg)
        if not reports and not step.commands:
            return  # the common tick
        pending = deque(reports)
        for cmd in step.commands:
            pending.extend(self.venue.send(cmd))
        while pending:
            self._handle(pending.popleft(), pending)

    # --- the agent's side -----------------------------------------------------------------------------

    def act(self, fraction: float, action: float, parameter_sha256: str = "") -> None:
        """The agent wants `fraction` of trade size (its output was `action`): a PolicyActed, at the time of
        the event it saw, where that changes what it wants (the strategy pursues the target it has)."""
        if fraction == self.fraction:
            return
        self.fraction = fraction
        seen = self.market.data[self.index]
        self._take(PolicyActed(ts_event=seen.ts_event, ts_init=seen.ts_init, policy_id=self.policy_id,
                               parameter_sha256=parameter_sha256, symbol=self.symbol, as_of=self.seen_seq,
                               action=action, fraction=fraction))

    def advance(self) -> bool:
        """The next `decision_every` events; False where the data ended first (nothing more to see)."""
        data = self.market.data
        for _ in range(self.cfg.decision_every):
            if self.index + 1 >= len(data):
                return False
            self.index += 1
            self._market(data[self.index])
        self.steps += 1
        return True

    @property
    def position(self) -> int:
        pos = self.kernel.portfolio.positions.get(self.symbol)
        return pos.quantity if pos is not None else 0

    @property
    def unrealized(self) -> int:
        pos = self.kernel.portfolio.positions.get(self.symbol)
        return pos.unrealized_pnl if pos is not None else 0

    @property
    def halted(self) -> bool:
        return self.kernel.trading.state is _HALTED

    def summary(self) -> dict[str, float]:
        """What the episode came to: equity and drawdown (basis points of the full notional), fills,
        commissions (basis points), denials, steps."""
        k, bp = self.kernel, 1e4 / self.notional
        pos = k.portfolio.positions.get(self.symbol)
        return {"equity_bp": k.portfolio.equity * bp, "max_drawdown_bp": k.portfolio.max_drawdown * bp,
                "fills": float(pos.fills if pos is not None else 0),
                "commissions_bp": (pos.commissions if pos is not None else 0) * bp,
                "denials": float(k.orders.denied), "steps": float(self.steps)}


def _price(msg: MarketData) -> int:
    """A market data event's reference price, nanos: a quote's mid, a bar's close, a trade's price."""
    if type(msg) is QuoteTick:
        return (msg.bid + msg.ask) // 2
    return msg.close if type(msg) is Bar else cast(TradeTick, msg).price


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
        width = self.width - EXTRA
        out[:width] = self.market.rows[ep.index]
        bp = 1e4 / ep.notional
        out[width] = ep.position / ep.size
        out[width + 1] = ep.unrealized * bp
        out[width + 2] = ep.kernel.portfolio.equity * bp
        out[width + 3] = 1.0 if denied else 0.0

    def step(self, ep: Episode, action: Any, sha: str = "") -> tuple[float, bool, bool, bool]:
        """(reward, terminated, truncated, denied) of one step of `ep`."""
        fraction, value = fraction_of(action, self.cfg)
        equity, denials = ep.kernel.portfolio.equity, ep.kernel.orders.denied
        ep.act(fraction, value, sha)
        more = ep.advance()
        held = ep.position / ep.size
        reward = (ep.kernel.portfolio.equity - equity) * 1e4 / ep.notional - self.cfg.risk_penalty * held * held
        terminated = ep.halted
        truncated = not terminated and (not more or ep.steps >= self.cfg.episode_steps
                                        or ep.index + 1 >= len(self.market))
        return reward, terminated, truncated, ep.kernel.orders.denied != denials


class TradingEnv(gym.Env):
    """One episode at a time, with Gymnasium's API. `record`: every episode keeps its journal records
    (`episode.records`), to be written with `write`."""

    metadata: dict[str, Any] = {"render_modes": []}

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

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

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
        rewards = np.empty(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        final_obs: list[np.ndarray | None] = [None] * n
        ended: list[dict | None] = [None] * n
        for i in range(n):
            ep = self.episodes[i]
            rewards[i], terminated[i], truncated[i], denied = core.step(ep, actions[i], sha)
            core.observe(ep, self.obs[i], denied)
            if terminated[i] or truncated[i]:
                final_obs[i], ended[i] = self.obs[i].copy(), ep.summary()
                self.episodes[i] = ep = core.start(self.rngs[i], None, False)
                core.observe(ep, self.obs[i], False)
        infos: dict[str, Any] = {}
        if any(e is not None for e in ended):
            infos = {"final_obs": final_obs, "episode": ended}
        return self.obs.copy(), rewards, terminated, truncated, infos


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


async def write(store: JournalStore, name: str, episode: Episode, trading: TradingConfig) -> int:
    """An episode recorded with `record` into the new journal `name`, in its order; returns its last
    sequence number. `foxhunt replay NAME --verify` then replays it like any run."""
    if episode.records is None:
        raise ValueError("the episode was not recorded (TradingEnv(record=True))")
    try:
        if (await store.info(name)).last_seq:
            raise JournalMismatch(f"journal {name!r} already has events; an episode goes into a new journal")
    except JournalNotFound:
        pass
    run = episode.kernel.run
    async with store.writer(name, config=trading.to_json(), config_digest=trading.digest(),
                            fingerprint=run.fingerprint if run is not None else {}) as journal:
        for message, cause in episode.records:
            if journal.backlogged:
                await journal.relieve()
            journal.append(message, cause)
        await journal.flush()
        return journal.last_seq
