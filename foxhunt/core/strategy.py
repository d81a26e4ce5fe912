"""What a strategy is, and the context through which it reads state and asks for orders.

A strategy never builds messages and never talks to a venue: it asks its context, and the kernel turns
each request into a command that passes the pre-trade gate. Callbacks return nothing.

A strategy knows the trading state (`ctx.trading_state`, and `on_trading_state` when it changes) and should
ask for nothing the state forbids: no new exposure while REDUCING, nothing but cancels while HALTED. And it
knows what it asked for in vain: `ctx.still_denied` says whether the same order was denied and nothing the
denial may have depended on has changed since. The kernel bounds what a strategy that asks anyway writes
to the journal (core/risk/repeats.py), but every ask still costs a check.
"""

from __future__ import annotations

import random
import zlib

from foxhunt.core.effects import Host
from foxhunt.core.orders import Order
from foxhunt.messages.base import Derived
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import CancelOrder, OrderType, Side, SubmitOrder, TimeInForce
from foxhunt.messages.scores import ModelScored, PolicyActed
from foxhunt.messages.system import TimerFired, TradingState, TradingStateChanged

# What a denial may depend on that a strategy's context sees change: the trading state, the position, the
# risk limits, the venues that are down, the instrument's price band. The rest (the run's clock for the throttles and a stale reference,
# the market for the collars, bands and VaR) it does not follow: a denied order may be asked for again once
# this much of the run's clock has passed.
ASK_AGAIN_AFTER_NS = 1_000_000_000


class Strategy:
    """Base class: override the callbacks you need. `strategy_id` names the strategy's orders."""

    strategy_id: str = "strategy"

    def on_start(self, ctx: StrategyContext) -> None:
        pass

    def on_quote(self, quote: QuoteTick, ctx: StrategyContext) -> None:
        pass

    def on_trade(self, trade: TradeTick, ctx: StrategyContext) -> None:
        pass

    def on_bar(self, bar: Bar, ctx: StrategyContext) -> None:
        pass

    def on_order_event(self, event: object, order: Order, ctx: StrategyContext) -> None:
        pass

    def on_timer(self, timer: TimerFired, ctx: StrategyContext) -> None:
        pass

    def on_score(self, score: ModelScored, ctx: StrategyContext) -> None:
        """A model's forecast (messages/scores.py), checked by the kernel: its outputs have the shape its
        horizons and quantiles say, are finite, and its symbol is an instrument."""

    def on_action(self, act: PolicyActed, ctx: StrategyContext) -> None:
        """A trading agent's decision (messages/scores.py), checked by the kernel: its symbol is an instrument
        and its fraction a number in [-1, 1]."""

    def on_trading_state(self, change: TradingStateChanged, ctx: StrategyContext) -> None:
        """Trading moved to `change.state` (ACTIVE, REDUCING, HALTED) for `change.cause`; called for every
        strategy, paused or not. Already in force: `ctx.trading_state` is the new state."""

    def digest_state(self) -> object:
        """What of the strategy's own state decides what it asks for, as plain data (numbers, strings and
        lists of them, in an order that does not depend on the process), for the kernel's state digest:
        two kernels fed the same journal must agree on it. None: the strategy keeps nothing."""
        return None


class StrategyContext:
    """One per strategy. Requests are collected and handed to the kernel when the callback returns."""

    def __init__(self, kernel: Host, strategy: Strategy) -> None:
        self._kernel = kernel
        self.positions = kernel.portfolio.positions  # read-only view: symbol -> Position
        self.strategy_id = strategy.strategy_id
        self.rng = random.Random(0)
        # per (symbol, side): the last order denied, as (quantity, type, reduce_only), what it depended on
        # then (`_grounds`), and when it may be asked for again whatever (ASK_AGAIN_AFTER_NS)
        self.denied: dict[tuple[str, Side], tuple[tuple[int, OrderType, bool], tuple, int]] = {}

    def seed(self, run_seed: int) -> None:
        # crc32, not hash(): str hashes are salted per process and would break replay.
        self.rng.seed(run_seed ^ zlib.crc32(self.strategy_id.encode()))

    @property
    def trading_state(self) -> TradingState:
        """ACTIVE (anything the gate allows), REDUCING (only orders that reduce a position), HALTED (nothing
        new; cancels still pass)."""
        return self._kernel.trading.state

    def still_denied(self, symbol: str, side: Side, quantity: int, order_type: OrderType = OrderType.MARKET, *,
                     reduce_only: bool = False) -> bool:
        """Whether this order (its price aside) was the last one of its symbol and side that the gate denied,
        and nothing the denial may have depended on has changed since: the trading state, the position, the
        risk limits, the venues that are down, the price band, and less than ASK_AGAIN_AFTER_NS of the run's
        clock."""
        if not self.denied:
            return False
        last = self.denied.get((symbol, side))
        if last is None:
            return False
        terms, grounds, until = last
        return (terms == (quantity, order_type, reduce_only) and self._kernel.now_ns < until
                and grounds == self._grounds(symbol))

    def remember_denial(self, cmd: SubmitOrder) -> None:
        """The kernel's word that the gate denied this strategy's `cmd` (after its strategy has asked)."""
        self.denied[(cmd.symbol, cmd.side)] = ((cmd.quantity, cmd.order_type, cmd.reduce_only),
                                               self._grounds(cmd.symbol), self._kernel.now_ns + ASK_AGAIN_AFTER_NS)

    def digest_state(self) -> object:
        """What the context remembers of denials, for the kernel's state digest."""
        return [[symbol, side.value, qty, kind.value, reduce_only, grounds[0].value, *grounds[1:4],
                 list(grounds[4] or ()), until]
                for (symbol, side), ((qty, kind, reduce_only), grounds, until) in
                sorted(self.denied.items(), key=lambda item: (item[0][0], item[0][1].value))]

    def _grounds(self, symbol: str) -> tuple:
        k = self._kernel
        return k.trading.state, self.position(symbol), k.limits_version, sorted(k.venues_down), k.price_band(symbol)

    def record(self, event: Derived) -> None:
        """Journal a decision of the strategy's (a derived event of the input being handled), with its reasons."""
        self._kernel.emit(event)

    def kelly_quantity(self, symbol: str, win_prob: float, payoff: float) -> int | None:
        """The largest order quantity (nanos) the gate's Kelly check allows for this edge; None: no cap."""
        return self._kernel.kelly_quantity(symbol, win_prob, payoff)

    def trade_towards(self, symbol: str, target: int, edge: tuple[float, float] | None = None) -> str | None:
        """One market IOC order that moves the position towards `target` (nanos, signed), as the trading
        state allows: nothing while HALTED, only towards flat (reduce-only) while REDUCING; nothing while
        one of the strategy's orders of the symbol is working, nor an order the gate denied while nothing
        it depended on has changed (`still_denied`). `edge` (win probability, payoff) goes with an order
        that adds exposure, for the gate's Kelly cap; one that only reduces carries none. Returns the
        order's id, or None when none was asked for."""
        position = self.position(symbol)
        if position == target or self.open_orders(symbol):
            return None
        state = self.trading_state
        if state is TradingState.HALTED:
            return None  # nothing new while halted
        reducing = state is TradingState.REDUCING
        if reducing:  # towards flat and no further: a long may sell down to flat, a short buy up to it
            if position > 0:
                target = min(max(target, 0), position)
            elif position < 0:
                target = max(min(target, 0), position)
            else:
                target = 0
            if position == target:
                return None
        delta = target - position
        side = Side.BUY if delta > 0 else Side.SELL
        if self.still_denied(symbol, side, abs(delta), OrderType.MARKET, reduce_only=reducing):
            return None  # denied, and nothing it depended on has changed
        adds = abs(target) > abs(position) or (target > 0) != (position > 0) and target != 0
        return self.submit(symbol, side, abs(delta), OrderType.MARKET, time_in_force=TimeInForce.IOC,
                           reduce_only=reducing, edge=edge if adds and not reducing else None)

    def instrument(self, symbol: str) -> Instrument:
        return self._kernel.instruments[symbol]

    def position(self, symbol: str) -> int:
        pos = self.positions.get(symbol)
        return pos.quantity if pos is not None else 0

    def open_orders(self, symbol: str) -> list[Order]:
        return self._kernel.orders.open_for(symbol, self.strategy_id)

    def submit(
        self,
        symbol: str,
        side: Side,
        quantity: int,
        order_type: OrderType = OrderType.MARKET,
        *,
        price: int | None = None,
        trigger_price: int | None = None,
        time_in_force: TimeInForce = TimeInForce.GTC,
        reduce_only: bool = False,
        edge: tuple[float, float] | None = None,
    ) -> str:
        """Ask for a new order; returns its id. The gate may still deny it (see on_order_event). `edge` is
        the strategy's estimate (win probability, payoff per unit risked), for the Kelly cap."""
        k = self._kernel
        order_id = k.next_order_id(self.strategy_id)
        k.request(
            SubmitOrder(
                ts_event=k.ts_event,
                ts_init=k.ts_init,
                order_id=order_id,
                strategy_id=self.strategy_id,
                symbol=symbol,
                side=side,
                order_type=order_type,
                quantity=quantity,
                price=price,
                trigger_price=trigger_price,
                time_in_force=time_in_force,
                reduce_only=reduce_only,
                edge_win_prob=None if edge is None else edge[0],
                edge_payoff=None if edge is None else edge[1],
            )
        )
        return order_id

    def cancel(self, order_id: str, reason: str = "") -> None:
        k = self._kernel
        order = k.orders.by_id.get(order_id)
        symbol = order.symbol if order is not None else ""  # no such order: the kernel denies the cancel
        k.request(
            CancelOrder(ts_event=k.ts_event, ts_init=k.ts_init, order_id=order_id, symbol=symbol, reason=reason)
        )
