"""A strategy's context: what a strategy reads of the kernel's state and how it asks for orders
(core/strategy.py says what a strategy is; `Strategy` and this class are imported from there).

Every order a strategy asks for passes here, so this module is compiled by mypyc (foxhunt/compiled.py). What
a strategy hands `submit` and `cancel` is typed `Any` on purpose: the context passes it on as it came, and
the kernel checks every field of the request (core/kernel.py, `malformed`): a float quantity or a price of
the wrong type is denied by name (MALFORMED_REQUEST), where a compiled parameter typed `int` would raise
TypeError out of the strategy's callback.
"""

from __future__ import annotations

import random
import zlib
from typing import Any, Final

from foxhunt.core.effects import Host
from foxhunt.core.orders import Order
from foxhunt.messages.base import Derived
from foxhunt.messages.market import Instrument
from foxhunt.messages.orders import CancelOrder, OrderType, Side, SubmitOrder, TimeInForce
from foxhunt.messages.system import TradingState

# What a denial may depend on that a strategy's context sees change: the trading state, the position, the
# risk limits, the venues that are down, the instrument's price band. The rest (the run's clock for the
# throttles and a stale reference, the market for the collars, bands and VaR) it does not follow: a denied
# order may be asked for again once this much of the run's clock has passed.
ASK_AGAIN_AFTER_NS: Final = 1_000_000_000

# what the order path compares with and asks for, as Final names (C statics, where compiled)
_HALTED: Final = TradingState.HALTED
_REDUCING: Final = TradingState.REDUCING
_BUY: Final = Side.BUY
_SELL: Final = Side.SELL
_MARKET: Final = OrderType.MARKET
_GTC: Final = TimeInForce.GTC
_IOC: Final = TimeInForce.IOC


class StrategyContext:
    """One per strategy. Requests are collected and handed to the kernel when the callback returns."""

    def __init__(self, kernel: Host, strategy_id: str) -> None:
        self._kernel = kernel
        self.positions = kernel.portfolio.positions  # read-only view: symbol -> Position
        self.strategy_id = strategy_id
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

    def still_denied(self, symbol: str, side: Side, quantity: int, order_type: OrderType = _MARKET, *,
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
        if state is _HALTED:
            return None  # nothing new while halted
        reducing = state is _REDUCING
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
        side = _BUY if delta > 0 else _SELL
        quantity = delta if delta > 0 else -delta
        if self.still_denied(symbol, side, quantity, _MARKET, reduce_only=reducing):
            return None  # denied, and nothing it depended on has changed
        adds = abs(target) > abs(position) or (target > 0) != (position > 0) and target != 0
        return self.submit(symbol, side, quantity, _MARKET, time_in_force=_IOC, reduce_only=reducing,
                           edge=edge if adds and not reducing else None)

    def instrument(self, symbol: str) -> Instrument:
        return self._kernel.instruments[symbol]

    def position(self, symbol: str) -> int:
        pos = self.positions.get(symbol)
        return pos.quantity if pos is not None else 0

    def open_orders(self, symbol: str) -> list[Order]:
        return self._kernel.orders.open_for(symbol, self.strategy_id)

    def submit(
        self,
        symbol: Any,
        side: Any,
        quantity: Any,
        order_type: Any = _MARKET,
        *,
        price: Any = None,
        trigger_price: Any = None,
        time_in_force: Any = _GTC,
        reduce_only: Any = False,
        edge: Any = None,
    ) -> str:
        """Ask for a new order; returns its id. The gate may still deny it (see on_order_event). `symbol` a
        str, `side` a Side, `quantity` an int of nanos, `order_type` an OrderType, `price` and `trigger_price`
        ints of nanos or None, `time_in_force` a TimeInForce, `reduce_only` a bool; `edge` is the strategy's
        estimate (win probability, payoff per unit risked), for the Kelly cap, or None."""
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

    def cancel(self, order_id: Any, reason: Any = "") -> None:
        """Ask for a working order's cancel (`order_id` a str, `reason` a str); one that names no working
        order is denied."""
        k = self._kernel
        order = k.orders.by_id.get(order_id)
        symbol = order.symbol if order is not None else ""  # no such order: the kernel denies the cancel
        k.request(
            CancelOrder(ts_event=k.ts_event, ts_init=k.ts_init, order_id=order_id, symbol=symbol, reason=reason)
        )
