"""What a strategy is, and the context through which it reads state and asks for orders (`StrategyContext`,
core/context.py).

A strategy never builds messages and never talks to a venue: it asks its context, and the kernel turns
each request into a command that passes the pre-trade gate. Callbacks return nothing.

A strategy knows the trading state (`ctx.trading_state`, and `on_trading_state` when it changes) and should
ask for nothing the state forbids: no new exposure while REDUCING, nothing but cancels while HALTED. And it
knows what it asked for in vain: `ctx.still_denied` says whether the same order was denied and nothing the
denial may have depended on has changed since. The kernel bounds what a strategy that asks anyway writes
to the journal (core/risk/repeats.py), but every ask still costs a check.
"""

from __future__ import annotations

from foxhunt.core.context import StrategyContext
from foxhunt.core.orders import Order
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.scores import ModelScored, PolicyActed
from foxhunt.messages.system import TimerFired, TradingStateChanged

__all__ = ["Strategy", "StrategyContext"]  # the context is core/context.py's, compiled: every order passes it


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
