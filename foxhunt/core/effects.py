"""The narrow interfaces the kernel hands its parts: what they may read, and the effects they may have.

The operator, the pre-trade gate, the safeguards and the strategies' contexts never hold the `Kernel`
class (no module of core/ imports core/kernel.py but the composition above it; the import-linter contract
in pyproject.toml checks it). Each is given the kernel typed as one of these protocols, which say all it
may touch: the state it reads (`KernelView`, read-only) and the effects it may have (`Effects`: derive an
event, ask for an order command, change the trading state). The kernel satisfies them structurally; mypy
checks that it does wherever it hands itself over.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol

from foxhunt.core.orders import Order, Orders
from foxhunt.core.portfolio import Portfolio
from foxhunt.core.trading_state import Cause, TradingStates
from foxhunt.messages.base import Derived, Input
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import CancelOrder, ReplaceOrder, SubmitOrder
from foxhunt.messages.system import TradingState


class KernelView(Protocol):
    """What the kernel knows, to be read and never changed by a part: it changes only as inputs arrive."""

    @property
    def instruments(self) -> Mapping[str, Instrument]: ...
    @property
    def orders(self) -> Orders: ...
    @property
    def portfolio(self) -> Portfolio: ...
    @property
    def market(self) -> Mapping[str, QuoteTick | Bar | TradeTick]: ...  # last usable market data per symbol
    @property
    def cancels_pending(self) -> Mapping[str, str]: ...  # working orders whose cancel is asked for: its reason
    @property
    def trading(self) -> TradingStates: ...
    @property
    def ts_event(self) -> int: ...  # of the input being handled
    @property
    def ts_init(self) -> int: ...
    @property
    def now_ns(self) -> int: ...  # the run's clock: the latest ts_init
    @property
    def venues_down(self) -> AbstractSet[str]: ...
    @property
    def limits_version(self) -> int: ...  # raised whenever the risk limits are set again

    def price_band(self, symbol: str) -> tuple[int, int] | None: ...  # the instrument's band now, if it has one

    def kelly_quantity(self, symbol: str, win_prob: float, payoff: float) -> int | None:
        """The largest quantity (nanos) the gate's Kelly check allows for this edge at the symbol's reference
        price; None where no Kelly capital is configured ([risk] kelly_capital) or there is no price."""


class Effects(Protocol):
    """What a part may do. Everything it does is an event of the input being handled, or a request that
    the kernel checks and journals after the part returns."""

    def emit(self, event: Derived) -> None:
        """Record a derived event of the input being handled."""

    def request(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> None:
        """Ask for an order command: it passes the pre-trade gate once the part returns."""

    def request_cancel(self, order: Order, cause: Input, reason: str) -> None:
        """Ask for a working order's cancel, stamped with the input that caused it."""

    def next_order_id(self, strategy_id: str) -> str:
        """A new order's id: the input's sequence number and a counter, the same in live and replay."""

    def change_trading(self, cause: Cause, msg: Input, text: str, to: TradingState | None = None,
                       cancel_reason: str | None = None) -> None:
        """Apply a cause to the trading state (core/trading_state.py says what each does), journaled as
        `TradingStateChanged` with `text`; where the cause cancels working orders, each is canceled with
        `cancel_reason` (by default "kill switch: " and `text`)."""


class Host(KernelView, Effects, Protocol):
    """The kernel as a strategy's context sees it: what it reads and what it may ask for."""
