"""Mean reversion: join the touch with a limit order when the mid strays `entry_z` standard deviations
from its rolling mean, go flat with a market order when it comes back inside `exit_z`. Limit orders that
rest longer than `order_ttl` updates are canceled. Exercises resting orders, partial fills and cancels.
It enters only while trading is ACTIVE (and cancels its resting entries when trading turns REDUCING), goes
flat unless trading is HALTED, and does not ask again for an order the gate denied until something it
depended on has changed.
"""

from __future__ import annotations

import math
from collections import deque

from foxhunt.core.strategies.params import ZScoreParams
from foxhunt.core.strategy import Strategy, StrategyContext
from foxhunt.messages.base import nanos
from foxhunt.messages.market import Bar, QuoteTick
from foxhunt.messages.orders import OrderType, Side, TimeInForce
from foxhunt.messages.system import TradingState, TradingStateChanged


class _Stats:
    """Rolling mean and variance over a fixed window, recomputed exactly from the window."""

    __slots__ = ("values", "total", "total_sq")

    def __init__(self, window: int) -> None:
        self.values: deque[float] = deque(maxlen=window)
        self.total = 0.0
        self.total_sq = 0.0

    def push(self, x: float) -> None:
        if len(self.values) == self.values.maxlen:
            old = self.values[0]
            self.total -= old
            self.total_sq -= old * old
        self.values.append(x)
        self.total += x
        self.total_sq += x * x


class ZScoreReversion(Strategy):
    strategy_id = "zscore"

    def __init__(self, params: ZScoreParams) -> None:
        self.params = params
        self.size = nanos(params.trade_size)
        self.stats: dict[str, _Stats] = {}
        self.age: dict[str, int] = {}

    def digest_state(self) -> object:
        stats = [[symbol, list(s.values), s.total, s.total_sq] for symbol, s in sorted(self.stats.items())]
        return [stats, sorted(self.age.items())]

    def on_quote(self, quote: QuoteTick, ctx: StrategyContext) -> None:
        self._on_price(quote.symbol, (quote.bid + quote.ask) * 0.5, quote.bid, quote.ask, ctx)

    def on_bar(self, bar: Bar, ctx: StrategyContext) -> None:
        self._on_price(bar.symbol, float(bar.close), bar.close, bar.close, ctx)

    def _on_price(self, symbol: str, mid: float, bid: int, ask: int, ctx: StrategyContext) -> None:
        stats = self.stats.get(symbol)
        if stats is None:
            stats = self.stats[symbol] = _Stats(self.params.window)
        stats.push(mid)
        n = len(stats.values)
        if n < self.params.window:
            return
        mean = stats.total / n  # float division: a float over an int (foxhunt/compiled.py)
        var = max(stats.total_sq / n - mean * mean, 0.0)  # float division
        if var == 0.0:
            return
        z = (mid - mean) / math.sqrt(var)  # float division
        working = ctx.open_orders(symbol)
        if working:
            self.age[symbol] = self.age.get(symbol, 0) + 1
            if self.age[symbol] >= self.params.order_ttl:
                for order in working:
                    ctx.cancel(order.order_id, "ttl")
            return
        self.age[symbol] = 0
        position = ctx.position(symbol)
        state = ctx.trading_state
        if position == 0 and abs(z) >= self.params.entry_z and state is TradingState.ACTIVE:
            side = Side.BUY if z < 0 else Side.SELL
            if ctx.still_denied(symbol, side, self.size, OrderType.LIMIT):
                return
            tick = ctx.instrument(symbol).tick_size
            price = bid if side is Side.BUY else ask
            price -= price % tick
            ctx.submit(symbol, side, self.size, OrderType.LIMIT, price=price, time_in_force=TimeInForce.GTC)
        elif position != 0 and abs(z) <= self.params.exit_z and state is not TradingState.HALTED:
            side = Side.SELL if position > 0 else Side.BUY
            if ctx.still_denied(symbol, side, abs(position), OrderType.MARKET, reduce_only=True):
                return
            ctx.submit(symbol, side, abs(position), OrderType.MARKET, time_in_force=TimeInForce.IOC, reduce_only=True)

    def on_trading_state(self, change: TradingStateChanged, ctx: StrategyContext) -> None:
        """Trading REDUCING: a resting entry order asks for exposure the state forbids, and is canceled (a
        halt that cancels, the kill switch, cancels it anyway; one that does not, such as the journal's, leaves
        it working by design)."""
        if change.state is TradingState.REDUCING:
            for symbol in sorted(self.stats):
                for order in ctx.open_orders(symbol):
                    if not order.reduce_only:
                        ctx.cancel(order.order_id, "trading reducing")
