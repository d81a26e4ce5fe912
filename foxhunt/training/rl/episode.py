"""One episode of an agent's trading: a fresh kernel, simulated venue and event clock (a backtest's, built
by the composition root: `Engine`, bootstrap.agent_engine), driven synchronously in the trading loop's
order, without the journal's I/O, and kept in memory where asked (`record`), to be written into a new
journal (`write`) that `foxhunt replay --verify` verifies like any run. The trading environment
(environment.py) steps it; its journal sequence numbers are the ones a journal would assign. Every step
of the environment runs through it, so it is compiled by mypyc with the kernel (foxhunt/compiled.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, Protocol

from foxhunt.config import TradingConfig
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import reference_price
from foxhunt.errors import ConfigError, JournalMismatch, JournalNotFound
from foxhunt.messages.base import Derived, Input, Message, nanos
from foxhunt.messages.fixed_point import ratio
from foxhunt.messages.market import MarketData
from foxhunt.messages.scores import PolicyActed
from foxhunt.messages.system import RunStarted, TradingState
from foxhunt.models.agent_configs import EnvConfig, extras, notional
from foxhunt.ports import Clock, JournalStore, Venue
from foxhunt.training.rl.market import Market

_HALTED: Final = TradingState.HALTED


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
        self.data = market.data
        self.symbol = market.symbol
        self.kernel = kernel = engine.kernel(trading)
        self.clock = engine.clock()
        self.venue = engine.venue(kernel, trading, self.clock)
        self.records: list[tuple[Message, int | None]] | None = [] if record else None
        self.seq = 0
        self.seen_seq = 0  # the sequence number of the market data event the agent last saw
        self.index = start  # its index in the market
        # the event itself (the one `_market` last handled): what a decision is stamped with
        self.seen = first = market.data[start]
        self.steps = 0
        self.fraction = 0.0  # what the agent last asked for
        self.size = nanos(trading.strategy.agent.trade_size)
        # the full position's notional at the first price, in money nanos: rewards are basis points of it
        inst = kernel.instruments[self.symbol]
        self.notional = notional(reference_price(first, 0)[0], self.size, inst.multiplier)
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
        self.seen = msg
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
        seen = self.seen
        self._take(PolicyActed(ts_event=seen.ts_event, ts_init=seen.ts_init, policy_id=self.policy_id,
                               parameter_sha256=parameter_sha256, symbol=self.symbol, as_of=self.seen_seq,
                               action=action, fraction=fraction))

    def advance(self) -> bool:
        """The next `decision_every` events; False where the data ended first (nothing more to see)."""
        data = self.data
        for _ in range(self.cfg.decision_every):
            if self.index + 1 >= len(data):
                return False
            self.index += 1
            self._market(data[self.index])
        self.steps += 1
        return True

    def step(self, fraction: float, action: float, parameter_sha256: str = "") -> tuple[float, bool, bool, bool]:
        """One step of the trading environment (environment.py): the agent's decision (`act`), then the next
        events (`advance`). Returns (reward, terminated, truncated, denied): the change in the kernel's
        equity in basis points of the full position's notional, less `risk_penalty` times the squared
        fraction held; terminated where trading is HALTED; truncated at the episode's length or the end of
        the data; denied where the gate denied an order in the step."""
        portfolio, orders, cfg = self.kernel.portfolio, self.kernel.orders, self.cfg
        equity, denials = portfolio.equity, orders.denied
        self.act(fraction, action, parameter_sha256)
        more = self.advance()
        held = ratio(self.position, self.size)
        gain = (portfolio.equity - equity) * 1e4 / self.notional  # float division: a float over an int
        reward = gain - cfg.risk_penalty * held * held
        terminated = self.halted
        truncated = not terminated and (not more or self.steps >= cfg.episode_steps
                                        or self.index + 1 >= len(self.data))
        return reward, terminated, truncated, orders.denied != denials

    def extras(self, denied: bool) -> tuple[float, float, float, float]:
        """The observation's values after its feature row (models/agent_configs.py, `observe`), where the
        gate denied an order in the last step or not."""
        return extras(self.position, self.size, self.unrealized, self.kernel.portfolio.equity, self.notional, denied)

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
