"""Circuit breakers on the account's equity, and the repeated-execution throttle.

- Daily loss: equity (realised plus unrealised PnL, minus commissions) down more than `max_daily_loss`
  since the first mark of the UTC day (event time).
- Drawdown: equity down more than `max_drawdown` from its peak.
- Repeated executions: `max_repeated_executions` fills of one symbol and side inside
  `repeated_execution_window_ms`: a strategy hitting the market again and again is halted.

A tripped equity breaker asks for REDUCING or HALTED (`breaker_action`); the repeated-execution throttle
asks for HALTED. Only an operator lifts either (`resume`); after that, the equity breakers stay quiet until
the next UTC day, so an acknowledged breach does not trip again on the next quote.
"""

from __future__ import annotations

from collections import deque

from foxhunt.core.risk.limits import RiskLimits, effective
from foxhunt.core.risk.market_rules import (
    NEW_YORK,
    ExchangeClock,
    SessionCloses,
    clock_band,
    in_session,
    mwcb_halt,
    plan_band,
)
from foxhunt.messages.base import format_fixed, nanos
from foxhunt.messages.orders import Side
from foxhunt.messages.system import TradingState

DAY_NS = 86_400 * 1_000_000_000


class Breakers:
    def __init__(self, limits: RiskLimits) -> None:
        self.configure(limits)
        self.day = -1
        self.day_start_equity = 0
        self.armed = True
        self.fills: dict[tuple[str, Side], deque[int]] = {}

    def configure(self, limits: RiskLimits) -> None:
        self.max_daily_loss = None if limits.max_daily_loss is None else nanos(limits.max_daily_loss)
        self.max_drawdown = None if limits.max_drawdown is None else nanos(limits.max_drawdown)
        self.action = TradingState.REDUCING if limits.breaker_action == "reduce" else TradingState.HALTED
        self.max_fills = limits.max_repeated_executions
        self.fill_window = limits.repeated_execution_window_ms * 1_000_000
        self.on_equity = self.max_daily_loss is not None or self.max_drawdown is not None  # checked per mark

    def check_equity(self, ts: int, equity: int, peak: int) -> str | None:
        """The cause, if this mark trips an equity breaker."""
        day = ts // DAY_NS
        if day != self.day:
            self.day, self.day_start_equity, self.armed = day, equity, True
        if not self.armed:
            return None
        loss = self.day_start_equity - equity
        if self.max_daily_loss is not None and loss > self.max_daily_loss:
            self.armed = False
            return f"breaker daily loss: loss={format_fixed(loss)} limit={format_fixed(self.max_daily_loss)}"
        drawdown = peak - equity
        if self.max_drawdown is not None and drawdown > self.max_drawdown:
            self.armed = False
            return f"breaker drawdown: drawdown={format_fixed(drawdown)} limit={format_fixed(self.max_drawdown)}"
        return None

    def check_fill(self, ts: int, symbol: str, side: Side) -> str | None:
        """The cause, if this fill makes the executions of its symbol and side too many, too fast."""
        if self.max_fills is None:
            return None
        recent = self.fills.setdefault((symbol, side), deque())
        recent.append(ts)
        while recent and ts - recent[0] >= self.fill_window:
            recent.popleft()
        if len(recent) >= self.max_fills:
            recent.clear()
            return (f"repeated executions: {self.max_fills} fills of {symbol} {side.value} within"
                    f" {self.fill_window // 1_000_000} ms")
        return None

    def acknowledged(self) -> None:
        """An operator resumed trading: the equity breakers wait for the next day."""
        self.armed = False


class VolatilityBreaker:
    """Pauses an instrument while the realised volatility of its mid exceeds `max_realized_vol_bps`:
    the root mean square of the last `vol_window` simple returns between samples taken every
    `vol_sample_ms` of event time (in basis points per sample interval). The instrument resumes when it
    falls back under the limit; both are events with the values behind them."""

    def __init__(self, limits: RiskLimits, symbols: list[str]) -> None:
        self.window = limits.vol_window
        self.sample_ns = limits.vol_sample_ms * 1_000_000
        self.returns: dict[str, deque[float]] = {s: deque(maxlen=self.window) for s in symbols}
        self.last: dict[str, tuple[int, float]] = {}  # symbol -> (next sample time, price at last sample)

    def on_mark(self, symbol: str, price: float, ts: int, limit_bps: int) -> tuple[bool, str] | None:
        """(paused, cause) when the instrument's state should change at this mark, else None."""
        last = self.last.get(symbol)
        if last is not None and ts < last[0]:
            return None
        self.last[symbol] = (ts - ts % self.sample_ns + self.sample_ns, price)
        if last is None or last[1] <= 0:
            return None
        window = self.returns[symbol]
        window.append(price / last[1] - 1.0)
        if len(window) < self.window:
            return None
        vol_bps = (sum(r * r for r in window) / len(window)) ** 0.5 * 10_000
        return (vol_bps > limit_bps, f"realised_vol_bps={vol_bps:.1f} limit_bps={limit_bps} window={self.window}")


class MarketWideBreaker:
    """Halts all trading on a decline of the reference index (`market_index`), under its rulebook
    (core/risk/market_rules.py).

    - us_equities, as NYSE Rule 7.12 and FINRA Rule 6121 write it: the decline from the index's previous
      close (the data's, else its configured `prior_close`), in the regular session, New York time. Level 1
      and 2 halt for `market_halt_minutes` before 3:25 p.m. and not from then on; Level 3 halts for the
      rest of the day, and only an operator resumes. Each level trips once a day.
    - around_the_clock: the reference is the index's first mark of the UTC day, standing in for a close
      such markets do not have, and the levels halt at any time; the first two for `market_halt_minutes`
      of event time, then trading resumes by itself; the third for the rest of the UTC day."""

    def __init__(self, limits: RiskLimits) -> None:
        self.configure(limits)
        self.day = -1
        self.reference = 0.0
        self.tripped = 0  # levels tripped today
        self.resume_at: int | None = None  # end of a timed halt, event time
        self.new_york = ExchangeClock(NEW_YORK)
        self.closes = SessionCloses()

    def configure(self, limits: RiskLimits) -> None:
        self.symbol = limits.market_index
        self.levels = limits.market_halt_levels_pct
        self.halt_minutes = limits.market_halt_minutes
        self.halt_ns = limits.market_halt_minutes * 60 * 1_000_000_000
        rulebook = effective(limits, self.symbol, "rulebook") if self.symbol else None
        self.us_equities = rulebook == "us_equities"
        prior = effective(limits, self.symbol, "prior_close") if self.symbol else None
        self.prior_close = None if prior is None else float(prior)

    def on_mark(self, symbol: str, price: float, ts: int) -> tuple[int | None, str] | None:
        """(halt until ts, or None for the rest of the day; cause) when a level trips at this mark."""
        if symbol != self.symbol:
            return None
        if self.us_equities:
            return self._on_mark_us(symbol, price, ts)
        day = ts // DAY_NS
        if day != self.day:
            self.day, self.reference, self.tripped = day, price, 0
        if self.reference <= 0:
            return None
        decline = (self.reference - price) / self.reference * 100
        level = sum(1 for threshold in self.levels if decline >= threshold)
        if level <= self.tripped:
            return None
        self.tripped = level
        cause = f"market-wide halt level {level}: {symbol} down {decline:.2f}% from {self.reference:g}"
        if level == 3:
            self.resume_at = None
            return None, cause
        self.resume_at = ts + self.halt_ns
        return self.resume_at, cause

    def _on_mark_us(self, symbol: str, price: float, ts: int) -> tuple[int | None, str] | None:
        day, minute = self.new_york.local(ts)
        prior = self.closes.on_mark(symbol, day, minute, price) or self.prior_close
        if day != self.day:
            self.day, self.tripped = day, 0
        if prior is None or not in_session(minute):
            return None
        level, minutes = mwcb_halt(prior, price, minute, self.levels, self.halt_minutes)
        if level <= self.tripped:
            return None
        self.tripped = level  # a level at or after 3:25 p.m. trips without halting, and cannot halt later
        if minutes == 0:
            return None
        decline = (prior - price) / prior * 100
        cause = f"market-wide halt level {level}: {symbol} down {decline:.2f}% from {prior:g}"
        self.resume_at = None if minutes is None else ts + minutes * 60_000_000_000
        return self.resume_at, cause


class PriceBandBreaker:
    """Price bands by tier around the mean mid of the last `band_reference_minutes`, under the
    instrument's rulebook (core/risk/market_rules.py): us_equities, the LULD Plan's bands in the regular session
    (none outside it), the percentage from the previous close (the data's, else the configured
    `prior_close`), doubled from 3:35 p.m. New York time for Tier 1 and Tier 2 at $3.00 or less;
    around_the_clock, the percentage from the reference, doubled near both ends of the day in a fixed UTC
    offset. Orders priced outside the band are denied, and a mid that stays outside it (a limit state) for
    `band_pause_seconds` pauses the instrument for `band_pause_minutes` (the Plan's 15 seconds and five
    minutes by default)."""

    def __init__(self, limits: RiskLimits) -> None:
        self.configure(limits)
        self.window: dict[str, deque[tuple[int, float]]] = {}
        self.sums: dict[str, float] = {}
        self.outside_since: dict[str, int] = {}
        self.paused_until: dict[str, int] = {}
        self.new_york = ExchangeClock(NEW_YORK)
        self.closes = SessionCloses()

    def configure(self, limits: RiskLimits) -> None:
        self.reference_ns = limits.band_reference_minutes * 60_000_000_000
        self.pause_after_ns = limits.band_pause_seconds * 1_000_000_000
        self.pause_ns = limits.band_pause_minutes * 60_000_000_000
        self.offset_minutes = limits.band_utc_offset_minutes
        self.limits = limits

    def on_mark(self, symbol: str, tier: int, price: float, ts: int):
        """((lower, upper) in price units, or None where no band applies; change) where change is None or
        (paused, cause)."""
        if effective(self.limits, symbol, "rulebook") == "us_equities":
            day, minute = self.new_york.local(ts)
            configured = effective(self.limits, symbol, "prior_close")
            prior = self.closes.on_mark(symbol, day, minute, price) or (
                None if configured is None else float(configured))
            if not in_session(minute):  # no band outside the regular session; the next one starts afresh
                self.window.pop(symbol, None)
                self.sums.pop(symbol, None)
                self.outside_since.pop(symbol, None)
                return None, self._pause_ended(symbol, ts)
            reference = self._reference(symbol, price, ts)
            lower, upper = plan_band(reference, tier, minute, prior)
        else:
            reference = self._reference(symbol, price, ts)
            minute = (ts // 60_000_000_000 + self.offset_minutes) % 1440
            lower, upper = clock_band(reference, tier, minute)
        if symbol in self.paused_until:
            return (lower, upper), self._pause_ended(symbol, ts)
        if lower <= price <= upper:
            self.outside_since.pop(symbol, None)
            return (lower, upper), None
        since = self.outside_since.setdefault(symbol, ts)
        if ts - since < self.pause_after_ns:
            return (lower, upper), None
        self.paused_until[symbol] = ts + self.pause_ns
        return (lower, upper), (True, f"price band: {price:g} outside {lower:g}-{upper:g} for "
                                      f"{(ts - since) // 1_000_000_000} s")

    def _reference(self, symbol: str, price: float, ts: int) -> float:
        """The mean mid over the last `band_reference_minutes`, this mark included."""
        window = self.window.setdefault(symbol, deque())
        window.append((ts, price))
        total = self.sums.get(symbol, 0.0) + price
        while ts - window[0][0] > self.reference_ns:
            total -= window.popleft()[1]
        self.sums[symbol] = total
        return total / len(window)

    def _pause_ended(self, symbol: str, ts: int) -> tuple[bool, str] | None:
        until = self.paused_until.get(symbol)
        if until is None or ts < until:
            return None
        del self.paused_until[symbol]
        self.outside_since.pop(symbol, None)
        return False, "price band pause ended"
