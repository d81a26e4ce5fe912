"""The risk limits: what `[risk]` and `[risk.instruments.X]` configure, each with its range.

Every field of `RiskLimits` is the default of every instrument, and `[risk.instruments.X]` overrides them
for instrument X (`effective`); a limit left unset is off. Journals carry their configuration and replay
rebuilds it, so a limit added from now on must default to off: an old journal then replays as recorded
(unless the kernel's BEHAVIOUR is raised with it, as for `repeated_denial_window_ms`).
Every limit has a range (`_RANGES`): a value outside it, or not finite, is a configuration error that names
it and changes nothing. The gate that applies them is core/risk/gate.py.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Literal

import msgspec

from foxhunt.messages.base import SCALE


class InstrumentRisk(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Limits of one instrument; quantities and notionals are decimals in instrument units."""

    max_order_qty: Decimal | None = None
    min_order_qty: Decimal | None = None
    max_order_notional: Decimal | None = None
    collar_bps: int | None = None  # limit price at most this many basis points from the reference price
    collar_ticks: int | None = None  # ... and at most this many ticks
    max_position_long: Decimal | None = None  # position plus working buys plus the order
    max_position_short: Decimal | None = None
    max_open_orders: int | None = None
    max_open_qty: Decimal | None = None
    reference_max_age_ms: int | None = None  # older reference data denies (market orders and collars)
    restricted: Literal["open", "no_trade", "reduce_only"] | None = None
    max_realized_vol_bps: int | None = None  # volatility breaker: pause the instrument above this
    band_tier: int | None = None  # price band (limit up-limit down style): 1 or 2 turns it on
    # the market rules the instrument trades under (core/risk/market_rules.py): "us_equities" (LULD and the
    # market-wide breakers as written, New York time) or "around_the_clock" (foxhunt's policy for FX, crypto)
    rulebook: Literal["around_the_clock", "us_equities"] | None = None
    prior_close: Decimal | None = None  # us_equities: the previous close, until the data has one


class RiskLimits(InstrumentRisk, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Defaults of every instrument, and the account's limits. The unit-free limits are on by default;
    quantities and money depend on the instrument and its currency, so they are set per instrument."""

    max_order_qty: Decimal | None = Decimal("10000000")
    collar_bps: int | None = 500
    max_open_orders: int | None = 100
    reference_max_age_ms: int | None = 60_000
    max_gross_exposure: Decimal | None = None  # account, money: sum of |position| at market
    max_net_exposure: Decimal | None = None  # account, money: |sum of signed positions| at market
    credit_limit: Decimal | None = None  # account, money: gross exposure plus working orders
    max_orders_per_window: int | None = 100  # account: new orders (and replaces) per order_window_ms
    order_window_ms: int = 1000
    max_messages_per_second: int | None = 200  # account: orders, replaces and cancels per second
    duplicate_window_ms: int | None = None  # an identical order (symbol, side, type, qty, price, tif) inside it
    self_match_prevention: bool = True  # an order that would trade with our own resting order
    max_var: Decimal | None = None  # portfolio gate, money: historical VaR of the book after the order
    max_expected_shortfall: Decimal | None = None  # ... and its expected shortfall
    var_confidence: float = 0.99
    var_window: int = 250  # return scenarios per instrument
    var_sample_ms: int = 60_000  # marks are sampled on this clock (event time) into returns
    kelly_capital: Decimal | None = None  # Kelly cap: an order with an edge estimate may risk at most
    kelly_multiplier: float = 0.5  # this fraction of the full Kelly stake of kelly_capital ...
    kelly_max_leverage: float = 1.0  # ... and never more than this times kelly_capital
    max_daily_loss: Decimal | None = None  # breaker, money: equity down this much since the UTC day began
    max_drawdown: Decimal | None = None  # breaker, money: equity down this much from its peak
    breaker_action: Literal["reduce", "halt"] = "halt"
    market_index: str | None = None  # market-wide halt: the instrument whose decline halts all trading
    market_halt_levels_pct: tuple[float, float, float] = (7.0, 13.0, 20.0)  # declines halting 15 min, 15 min, the day
    market_halt_minutes: int = 15
    band_reference_minutes: int = 5  # price band: reference is the mean mid over this many minutes
    band_pause_seconds: int = 15  # a price outside the band this long pauses the instrument ...
    band_pause_minutes: int = 5  # ... for this long
    band_utc_offset_minutes: int = -300  # exchange time for the band's time of day (fixed: replayable)
    vol_window: int = 30  # volatility breaker: sampled mid returns in the rolling window ...
    vol_sample_ms: int = 1000  # ... sampled on this clock (event time)
    max_repeated_executions: int | None = None  # this many fills, one symbol and side, inside the window halt
    repeated_execution_window_ms: int = 1000
    # a fill the kernel refuses (off the lot or the execution tick, beyond the collar, past the position
    # bound): money may have moved that the positions cannot show, so trading tightens to this
    refused_fill_action: Literal["reduce", "halt"] = "halt"
    # the same denial (strategy, symbol, request, side, reason) again inside this window is counted, not
    # journaled, and summarised when the window closes (core/risk/repeats.py); 0: journal every denial.
    # On by default, unlike the limits above: it came with kernel behaviour 7, which an older journal's
    # verify names (core/kernel.py, BEHAVIOUR)
    repeated_denial_window_ms: int = 10_000
    rulebook: Literal["around_the_clock", "us_equities"] | None = "around_the_clock"
    instruments: dict[str, InstrumentRisk] = {}

    def __post_init__(self) -> None:
        problems = _out_of_range(self)
        for symbol, override in self.instruments.items():
            problems += [f"instruments.{symbol}.{p}" for p in _out_of_range(override)]
        if problems:
            raise ValueError("; ".join(problems))
        levels = self.market_halt_levels_pct
        if len(levels) != 3 or not 0 < levels[0] < levels[1] < levels[2] < 100:
            raise ValueError(f"market_halt_levels_pct needs three rising percentages under 100, got {levels}")


# The range of every limit: a value outside it (negative, not finite, or so large that the int64 checks
# could not hold it) is a configuration error, named, never a limit the engine half applies. Quantities
# are at most a billion units (QTY_MAX nanos), money at most 10**15, rates and counts as below.
QTY_MAX = 10**18
OPEN_QTY_MAX = 4 * 10**18
_MONEY_MAX = Decimal(10**15)
_RANGES: dict[str, tuple[Any, Any]] = {
    **{name: (Decimal(0), Decimal(QTY_MAX) / SCALE) for name in (
        "max_order_qty", "min_order_qty", "max_position_long", "max_position_short", "max_open_qty")},
    **{name: (Decimal(0), _MONEY_MAX) for name in (
        "max_order_notional", "max_gross_exposure", "max_net_exposure", "credit_limit", "max_var",
        "max_expected_shortfall", "kelly_capital", "max_daily_loss", "max_drawdown")},
    "prior_close": (Decimal("0.000000001"), _MONEY_MAX),
    "collar_bps": (0, 1_000_000), "collar_ticks": (0, 10**9), "max_open_orders": (0, 1_000_000),
    "reference_max_age_ms": (0, 10**10), "max_realized_vol_bps": (0, 1_000_000), "band_tier": (1, 2),
    "max_orders_per_window": (0, 100_000), "order_window_ms": (1, 86_400_000),
    "max_messages_per_second": (0, 100_000), "duplicate_window_ms": (1, 86_400_000),
    "var_window": (2, 100_000), "var_sample_ms": (1, 86_400_000), "kelly_multiplier": (0.0, 10.0),
    "kelly_max_leverage": (0.0, 100.0), "market_halt_minutes": (1, 1440), "band_reference_minutes": (1, 1440),
    "band_pause_seconds": (1, 86_400), "band_pause_minutes": (1, 1440), "band_utc_offset_minutes": (-1440, 1440),
    "vol_window": (2, 100_000), "vol_sample_ms": (1, 86_400_000), "max_repeated_executions": (1, 1_000_000),
    "repeated_execution_window_ms": (1, 86_400_000), "repeated_denial_window_ms": (0, 86_400_000),
}


def _out_of_range(limits: InstrumentRisk) -> list[str]:
    """What of `limits` is out of its range (_RANGES) or not finite, as `name=value (why)`."""
    problems = []
    for name, (low, high) in _RANGES.items():
        value = getattr(limits, name, None)
        if value is None or isinstance(value, bool):
            continue
        finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
        if not finite or not low <= value <= high:
            problems.append(f"{name}={value} (must be a finite number from {low} to {high})")
    confidence = getattr(limits, "var_confidence", 0.5)
    if not (math.isfinite(confidence) and 0 < confidence < 1):
        problems.append(f"var_confidence={confidence} (must be between 0 and 1)")
    return problems


def effective(limits: RiskLimits, symbol: str, field: str):
    """One limit of one instrument: its override in [risk.instruments.SYMBOL], else the default."""
    override = limits.instruments.get(symbol)
    value = None if override is None else getattr(override, field)
    return getattr(limits, field) if value is None else value
