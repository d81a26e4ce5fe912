"""Safeguards that watch market data and fills rather than single orders, and act through the kernel's
effects (core/effects.py): the equity breakers and the repeated-execution throttle (trading state), the
market-wide halt, and the volatility and price-band pauses of single instruments, plus the portfolio
gate's return sampling. The kernel calls `on_mark` after every accepted mark (only while any of them is
configured: `active`) and `on_fill` after every fill (while the repeated-execution throttle is on: `fills`);
the rules themselves are in core/risk/breakers.py and core/risk/var.py, and what each does to the trading
state in core/trading_state.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from foxhunt.core.effects import Effects
from foxhunt.core.portfolio import Portfolio
from foxhunt.core.risk.breakers import Breakers, MarketWideBreaker, PriceBandBreaker, VolatilityBreaker
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.trading_state import Cause
from foxhunt.messages.base import Input
from foxhunt.messages.market import Instrument
from foxhunt.messages.orders import OrderFilled, OrderPartiallyFilled
from foxhunt.messages.system import InstrumentStateChanged, TradingState


class Safeguards:
    def __init__(self, gate: PreTradeGate, instruments: Mapping[str, Instrument], portfolio: Portfolio,
                 effects: Effects) -> None:
        limits = gate.limits
        self.gate, self.instruments, self.portfolio, self.effects = gate, instruments, portfolio, effects
        self.breakers = Breakers(limits)
        self.volatility = VolatilityBreaker(limits, sorted(instruments))
        self.market_wide = MarketWideBreaker(limits)
        self.price_bands = PriceBandBreaker(limits)
        self.volatility_paused: set[str] = set()
        self.active = False
        self.fills = False

    def digest_state(self) -> object:
        """The breakers' state for the kernel's digest (core/risk/breakers.py): each is a number, a list or a
        dict of them, kept in input order or sorted here."""
        b, v, m, p = self.breakers, self.volatility, self.market_wide, self.price_bands
        fills = sorted([symbol, side.value, list(times)] for (symbol, side), times in b.fills.items())
        return [
            [b.day, b.day_start_equity, b.armed, fills],
            [sorted([s, list(r)] for s, r in v.returns.items()), sorted(v.last.items())],
            [m.day, m.reference, m.tripped, m.resume_at, sorted(m.closes.last.items()), sorted(m.closes.prior.items())],
            [sorted([s, list(w)] for s, w in p.window.items()), sorted(p.sums.items()),
             sorted(p.outside_since.items()), sorted(p.paused_until.items()), sorted(p.closes.last.items()),
             sorted(p.closes.prior.items())],
            sorted(self.volatility_paused),
        ]

    def follow_limits(self) -> None:
        """Which safeguards run, decided once per change of the limits."""
        gate, limits = self.gate, self.gate.limits
        symbols = self.instruments
        self.breakers.configure(limits)
        self.market_wide.configure(limits)
        self.price_bands.configure(limits)
        self.equity = self.breakers.on_equity
        self.book_var = gate.book_var
        self.vol = any(gate.vol_limit(s) is not None for s in symbols)
        self.market = limits.market_index is not None
        self.bands = any(gate.instrument_limit(s, "band_tier") is not None for s in symbols)
        self.active = self.equity or self.book_var is not None or self.vol or self.market or self.bands
        self.fills = self.breakers.max_fills is not None  # the repeated-execution throttle counts the fills

    def on_mark(self, symbol: str, price: float, msg: Input) -> None:
        """A new mark of `symbol` at `price` (price units), from market data `msg`."""
        if self.equity:
            portfolio = self.portfolio
            cause = self.breakers.check_equity(msg.ts_event, portfolio.equity, portfolio.peak_equity)
            if cause is not None:
                self.effects.change_trading(Cause.BREAKER, msg, cause, self.breakers.action)
        if self.book_var is not None:
            self.book_var.on_mark(symbol, price, msg.ts_event)
        if self.vol:
            self._check_volatility(symbol, price, msg)
        if self.market:
            self._check_market(symbol, price, msg)
        if self.bands:
            self._check_band(symbol, price, msg)

    def on_fill(self, fill: OrderPartiallyFilled | OrderFilled, now_ns: int) -> None:
        """A fill booked, at the run's clock `now_ns` (the repeated-execution window measures on it)."""
        cause = self.breakers.check_fill(now_ns, fill.symbol, fill.side)
        if cause is not None:
            self.effects.change_trading(Cause.BREAKER, fill, cause, TradingState.HALTED)

    def _check_market(self, symbol: str, price: float, msg: Input) -> None:
        breaker = self.market_wide
        if breaker.resume_at is not None and msg.ts_event >= breaker.resume_at:
            breaker.resume_at = None
            self.effects.change_trading(Cause.MARKET_RESUMED, msg, "market-wide halt ended")
        tripped = breaker.on_mark(symbol, price, msg.ts_event)
        if tripped is None:
            return
        until, cause = tripped  # until None: level 3, no automatic resumption
        self.effects.change_trading(Cause.MARKET_HALT if until is not None else Cause.MARKET_CLOSED, msg, cause)

    def _check_band(self, symbol: str, price: float, msg: Input) -> None:
        gate = self.gate
        tier = gate.instrument_limit(symbol, "band_tier")
        if tier is None:
            return
        band, change = self.price_bands.on_mark(symbol, tier, price, msg.ts_event)
        if band is None:
            gate.bands.pop(symbol, None)
        else:
            gate.bands[symbol] = (round(band[0] * 1e9), round(band[1] * 1e9))
        if change is not None:
            self._pause(symbol, "PRICE_BAND_PAUSE", change[0], change[1], msg)

    def _check_volatility(self, symbol: str, price: float, msg: Input) -> None:
        limit = self.gate.vol_limit(symbol)
        change = None if limit is None else self.volatility.on_mark(symbol, price, msg.ts_event, limit)
        if change is None or change[0] == (symbol in self.volatility_paused):
            return
        paused, cause = change
        if paused:
            self.volatility_paused.add(symbol)
        else:
            self.volatility_paused.discard(symbol)
        self._pause(symbol, "VOLATILITY_PAUSE", paused, f"volatility breaker: {cause}", msg)

    def _pause(self, symbol: str, reason: str, paused: bool, cause: str, msg: Input) -> None:
        self.gate.set_paused(symbol, reason, paused)
        self.effects.emit(
            InstrumentStateChanged(ts_event=msg.ts_event, ts_init=msg.ts_init, symbol=symbol, paused=paused, cause=cause)
        )
