"""Builders shared by the unit tests of the core."""

from __future__ import annotations

from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategy import Strategy
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import Instrument, QuoteTick

EURUSD = Instrument(symbol="EURUSD", tick_size=d("0.00001"), lot_size=d("1000"), currency="USD")
INSTRUMENTS = {"EURUSD": EURUSD}


def quote(ts: int, bid: str, ask: str, bid_size: str = "0", ask_size: str = "0", symbol: str = "EURUSD"):
    return QuoteTick(ts_event=ts, ts_init=ts, symbol=symbol, bid=d(bid), ask=d(ask), bid_size=d(bid_size),
                     ask_size=d(ask_size))


class Scripted(Strategy):
    """Calls `script(quote, ctx)` on every quote and records every order event it is told about."""

    strategy_id = "scripted"

    def __init__(self, script=None) -> None:
        self.script = script
        self.events: list[object] = []

    def on_quote(self, quote, ctx) -> None:
        if self.script is not None:
            self.script(quote, ctx)

    def on_order_event(self, event, order, ctx) -> None:
        self.events.append(event)


class Clock:
    def __init__(self, now: int = 0) -> None:
        self.t = now

    def now(self) -> int:
        return self.t

    def stamp(self, ts_event: int) -> int:
        return ts_event


def kernel(script=None, max_order_qty: str = "1000000") -> tuple[Kernel, Scripted]:
    strategy = Scripted(script)
    from decimal import Decimal

    gate = PreTradeGate(RiskLimits(max_order_qty=Decimal(max_order_qty)), INSTRUMENTS)
    return Kernel(INSTRUMENTS, [strategy], gate), strategy
