"""What a strategy is, and the context through which it reads state and asks for orders.

A strategy never builds messages and never talks to a venue: it asks its context, and the kernel turns
each request into a command that passes the pre-trade gate. Callbacks return nothing.
"""

from __future__ import annotations

import random
import zlib

from foxhunt.core.effects import Host
from foxhunt.core.orders import Order
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import CancelOrder, OrderType, Side, SubmitOrder, TimeInForce
from foxhunt.messages.system import TimerFired


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

    def seed(self, run_seed: int) -> None:
        # crc32, not hash(): str hashes are salted per process and would break replay.
        self.rng.seed(run_seed ^ zlib.crc32(self.strategy_id.encode()))

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
