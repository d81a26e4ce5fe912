"""Trend following: long while the fast EMA of the mid is above the slow one, short while below.

Trades often on noisy data, which is what the order path needs exercising with. Market orders, IOC. While
trading is REDUCING it only goes towards flat (reduce-only orders), while HALTED it asks for nothing, and an
order the gate denied is not asked for again until something it depended on has changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from foxhunt.core.strategies.params import EmaCrossParams
from foxhunt.core.strategy import Strategy, StrategyContext
from foxhunt.messages.base import nanos
from foxhunt.messages.market import Bar, QuoteTick


@dataclass(slots=True)
class _Averages:
    """One symbol's two moving averages, and how many prices they have taken."""

    fast: float
    slow: float
    updates: int = 1


class EmaCross(Strategy):
    strategy_id = "ema_cross"

    def __init__(self, params: EmaCrossParams) -> None:
        self.params = params
        self.size = nanos(params.trade_size)
        self.alpha_fast = 2.0 / (params.fast + 1)
        self.alpha_slow = 2.0 / (params.slow + 1)
        self.warmup = params.slow
        self.state: dict[str, _Averages] = {}

    def digest_state(self) -> object:
        return [[symbol, a.fast, a.slow, a.updates] for symbol, a in sorted(self.state.items())]

    def on_bar(self, bar: Bar, ctx: StrategyContext) -> None:
        self.on_price(bar.symbol, float(bar.close), ctx)

    def on_quote(self, quote: QuoteTick, ctx: StrategyContext) -> None:
        self.on_price(quote.symbol, (quote.bid + quote.ask) * 0.5, ctx)

    def on_price(self, symbol: str, price: float, ctx: StrategyContext) -> None:
        st = self.state.get(symbol)
        if st is None:
            self.state[symbol] = _Averages(price, price)
            return
        fast = st.fast = st.fast + self.alpha_fast * (price - st.fast)
        slow = st.slow = st.slow + self.alpha_slow * (price - st.slow)
        st.updates += 1
        if st.updates < self.warmup or fast == slow:
            return
        ctx.trade_towards(symbol, self.size if fast > slow else -self.size)
