"""The pre-trade risk engine: every order command passes it before it can reach a venue.

One compiled kernel call per order (core/risk_checks.py) checks, in this order, the first that fails
naming the denial: trading state (HALTED, REDUCING), restricted list (no trade, reduce only), reduce-only
orders, lot and tick conformity, minimum and maximum quantity, reference price present and fresh, maximum
notional, price collars (basis points and ticks around the reference price), position limits long and
short including working orders, open orders and open quantity, the account's gross and net exposure and
credit (positions at market plus working orders), the order and message throttles, duplicate orders and
self-match prevention. An order that reduces a position is not held back by position, exposure or credit
limits. Then, if configured, the portfolio gate (core/risk_var.py): the book's historical VaR and expected
shortfall after the order. Breakers and the repeated-execution throttle act on the trading state, not on
single orders, the volatility and price-band breakers pause single instruments (orders priced outside
an instrument's band are denied), and the market-wide breaker halts
everything on a reference index's decline (core/breakers.py). Orders that carry the strategy's edge
estimate are also capped by fractional Kelly sizing.

Configuration: every field of `RiskLimits` is the default of every instrument, and `[risk.instruments.X]`
overrides them for instrument X; a limit left unset is off. Journals carry their configuration and replay rebuilds it, so a limit added from now on must
default to off: an old journal then replays as recorded.

The reference price is the last market data of the instrument that the kernel accepted: a quote's mid, a
bar's close, a trade's price; its age is measured in event time, from that data to the input being
handled.
A denial is a value (`Denial`), never an exception; the kernel turns it into an `OrderDenied` event.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Literal, NamedTuple

import msgspec
import numpy as np

from foxhunt.core import risk_checks as rc
from foxhunt.core.fixed import nanos
from foxhunt.core.risk_var import BookVar
from foxhunt.messages.base import SCALE, format_fixed
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import OrderType, ReplaceOrder, Side, SubmitOrder, TimeInForce
from foxhunt.messages.system import TradingState

if TYPE_CHECKING:
    from foxhunt.core.kernel import Kernel
    from foxhunt.core.orders import Order


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
    instruments: dict[str, InstrumentRisk] = {}

    def __post_init__(self) -> None:
        for name in ("max_orders_per_window", "max_messages_per_second"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 100_000:
                raise ValueError(f"{name} must be between 0 and 100000, got {value}")
        if self.order_window_ms <= 0:
            raise ValueError(f"order_window_ms must be positive, got {self.order_window_ms}")
        levels = self.market_halt_levels_pct
        if len(levels) != 3 or not 0 < levels[0] < levels[1] < levels[2] < 100:
            raise ValueError(f"market_halt_levels_pct needs three rising percentages under 100, got {levels}")
        if not 0 < self.var_confidence < 1 or self.var_window < 2 or self.var_sample_ms <= 0:
            raise ValueError("needs 0 < var_confidence < 1, var_window >= 2 and var_sample_ms > 0")


class Denial(NamedTuple):
    reason: str
    detail: str


_RESTRICTED = {None: rc.OPEN, "open": rc.OPEN, "no_trade": rc.NO_TRADE, "reduce_only": rc.REDUCE_ONLY_LIST}


def _limit_or_off(value: Decimal | int | None, convert=nanos) -> int:
    return rc.UNLIMITED if value is None else convert(value)


def effective(limits: RiskLimits, symbol: str, field: str):
    """One limit of one instrument: its override in [risk.instruments.SYMBOL], else the default."""
    override = limits.instruments.get(symbol)
    value = None if override is None else getattr(override, field)
    return getattr(limits, field) if value is None else value


def limit_row(defaults: RiskLimits, inst: Instrument) -> np.ndarray:
    """The kernel's int64 limit row for one instrument, the instrument's overrides applied."""

    def pick(field: str):
        return effective(defaults, inst.symbol, field)

    row = np.full(rc.ROW_FIELDS, rc.UNLIMITED, dtype=np.int64)
    row[rc.L_LOT], row[rc.L_TICK], row[rc.L_MULT] = inst.lot_size, inst.tick_size, inst.multiplier
    row[rc.L_MIN_QTY] = 0 if pick("min_order_qty") is None else nanos(pick("min_order_qty"))
    row[rc.L_MAX_QTY] = _limit_or_off(pick("max_order_qty"))
    notional = pick("max_order_notional")
    if notional is not None:  # money nanos = lots*lot * ticks*tick * multiplier / SCALE, so in lots times ticks:
        row[rc.L_MAX_NOTIONAL_LT] = nanos(notional) * SCALE // (inst.lot_size * inst.tick_size * inst.multiplier)
    row[rc.L_COLLAR_BPS] = _limit_or_off(pick("collar_bps"), int)
    row[rc.L_COLLAR_TICKS] = _limit_or_off(pick("collar_ticks"), int)
    row[rc.L_MAX_LONG] = _limit_or_off(pick("max_position_long"))
    row[rc.L_MAX_SHORT] = _limit_or_off(pick("max_position_short"))
    row[rc.L_MAX_OPEN_ORDERS] = _limit_or_off(pick("max_open_orders"), int)
    row[rc.L_MAX_OPEN_QTY] = _limit_or_off(pick("max_open_qty"))
    row[rc.L_REF_MAX_AGE] = _limit_or_off(pick("reference_max_age_ms"), lambda ms: ms * 1_000_000)
    row[rc.L_RESTRICTED] = _RESTRICTED[pick("restricted")]
    row[rc.L_PAUSED :] = 0  # no pause, and the state of an instrument with no orders and no position
    return row


class PreTradeRisk:
    def __init__(self, limits: RiskLimits, instruments: dict[str, Instrument]) -> None:
        self.instruments = instruments
        compiled = rc.kernels()
        self.check, self.record_message = compiled.check_order_nb, compiled.record_message_nb
        self.flow = np.zeros(0, dtype=np.int64)  # configure() builds the engine's state and these views into it
        self.book_var: BookVar | None = None
        # per instrument, a view of its row in the engine's state: its limits, then its state (rc.S_*: position,
        # working orders, our best resting prices), kept in step with fills and order events (on_position,
        # on_order), so a check gathers nothing
        self.rows: dict[str, np.ndarray] = {}
        self.bands: dict[str, tuple[int, int]] = {}  # symbol -> (lower, upper) price band, nanos
        self.configure(limits)
        # our resting limit prices per symbol, price -> number of orders, for self-match prevention
        self.resting = {symbol: ({}, {}) for symbol in instruments}
        self.working_value = 0.0

    def configure(self, limits: RiskLimits) -> None:
        """Take new limits; working orders stay counted, and the throttles' windows survive unless their
        sizes changed."""
        unknown = sorted(set(limits.instruments) - set(self.instruments))
        if unknown:
            raise ValueError(f"risk limits for instruments that are not configured: {', '.join(unknown)}")
        if limits.market_index is not None and limits.market_index not in self.instruments:
            raise ValueError(f"market_index {limits.market_index!r} is not a configured instrument")
        self.limits = limits
        rows = {symbol: limit_row(limits, inst) for symbol, inst in self.instruments.items()}
        for symbol, row in self.rows.items():  # a breaker's pause and the instrument's state are not limits
            rows[symbol][rc.L_PAUSED :] = row[rc.L_PAUSED :]
        off = float("inf")
        account = [off if v is None else float(v) for v in
                   (limits.max_gross_exposure, limits.max_net_exposure, limits.credit_limit)] + [0.0, 0.0]
        flow = flow_state(limits)
        sizes = [rc.F_ORDER_LIMIT, rc.F_ORDER_WINDOW, rc.F_MSG_LIMIT, rc.F_MSG_WINDOW, rc.F_DUP_WINDOW, rc.F_DUP_SLOTS]
        if flow.size == self.flow.size and (flow[sizes] == self.flow[sizes]).all():  # the windows survive
            flow[rc.F_HEADER :] = self.flow[rc.F_HEADER :]
            for head in (rc.F_ORDER_HEAD, rc.F_MSG_HEAD, rc.F_DUP_HEAD):
                flow[head] = self.flow[head]
        symbols = sorted(self.instruments)
        for i, symbol in enumerate(symbols):
            rows[symbol][rc.S_INSTRUMENT] = i
        # the check's one array, and views into it for the engine's own updates
        self.engine = rc.engine_state(np.array(account), [rows[s] for s in symbols], flow)
        self.row_at = {s: rc.E_ROWS + i * rc.ROW_FIELDS for i, s in enumerate(symbols)}
        self._views()
        self.kelly_capital = None if limits.kelly_capital is None else float(limits.kelly_capital)
        self.max_var = None if limits.max_var is None else float(limits.max_var)
        self.max_es = None if limits.max_expected_shortfall is None else float(limits.max_expected_shortfall)
        if (self.max_var is not None or self.max_es is not None) and self.book_var is None:
            self.book_var = BookVar(
                sorted(self.instruments), limits.var_window, limits.var_sample_ms * 1_000_000, limits.var_confidence
            )

    def _views(self) -> None:
        """The views into the engine's one array that the engine updates it through."""
        self.rows = {s: self.engine[at : at + rc.ROW_FIELDS] for s, at in self.row_at.items()}
        # the same rows as memoryviews, for the order path's bookkeeping: an element read or written through
        # a memoryview is a plain int, about half the cost of a numpy element's
        self.cells = {s: memoryview(row) for s, row in self.rows.items()}
        self.account = self.engine[rc.E_ACCOUNT : rc.E_ROWS].view(np.float64)
        self.flow = self.engine[self.engine[rc.E_FLOW_AT] :]

    # A kernel snapshot (runtime/snapshots.py) pickles the engine: its one array goes whole, the views into
    # it and the compiled check are made again, so the restored views still share the array.
    _REMADE = ("check", "record_message", "rows", "cells", "account", "flow")

    def __getstate__(self) -> dict:
        return {k: v for k, v in vars(self).items() if k not in self._REMADE}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        compiled = rc.kernels()
        self.check, self.record_message = compiled.check_order_nb, compiled.record_message_nb
        self._views()

    def working_orders(self) -> dict[str, tuple[int, int, int]]:
        """Per instrument with working orders: (buy quantity, sell quantity, orders), quantities in nanos."""
        return {symbol: (int(row[rc.S_OPEN_BUY]), int(row[rc.S_OPEN_SELL]), int(row[rc.S_OPEN_ORDERS]))
                for symbol, row in sorted(self.rows.items()) if row[rc.S_OPEN_ORDERS]}

    def instrument_limit(self, symbol: str, field: str):
        """One of the instrument's limits, its override applied."""
        return effective(self.limits, symbol, field)

    def vol_limit(self, symbol: str) -> int | None:
        return self.instrument_limit(symbol, "max_realized_vol_bps")

    def paused_instruments(self) -> dict[str, str]:
        """Instruments a breaker paused, with the breaker's reason name."""
        names = {code: name for name, code in rc.CODES.items()}
        return {s: names[int(row[rc.L_PAUSED])] for s, row in sorted(self.rows.items()) if row[rc.L_PAUSED]}

    def set_paused(self, symbol: str, reason: str, paused: bool) -> None:
        """Pause an instrument for a breaker's reason (a REASONS name), or lift that reason's pause only."""
        row = self.rows[symbol]
        if paused:
            row[rc.L_PAUSED] = rc.CODES[reason]
        elif row[rc.L_PAUSED] == rc.CODES[reason]:
            row[rc.L_PAUSED] = 0

    def set_limit(self, name: str, text: str) -> tuple[str, str]:
        """Change one limit by its path in [risk] (`collar_bps`, `instruments.EURUSD.max_order_qty`);
        return (previous, new) as text. ValueError, naming what is wrong, changes nothing."""
        raw = msgspec.to_builtins(self.limits)
        keys = name.split(".")
        node = raw
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ValueError(f"no risk limit named {name!r}")
        previous = node.get(keys[-1])
        node[keys[-1]] = None if text in ("off", "none") else text
        try:
            limits = msgspec.convert(raw, RiskLimits, strict=False)
        except msgspec.ValidationError as e:
            raise ValueError(f"risk limit {name}={text!r}: {e}") from None
        self.configure(limits)
        return ("off" if previous is None else str(previous)), text

    # --- checks ----------------------------------------------------------------------------------

    def check_submit(self, cmd: SubmitOrder, kernel: Kernel) -> Denial | None:
        band = self.bands.get(cmd.symbol)
        if band is not None and cmd.price is not None and not band[0] <= cmd.price <= band[1]:
            return Denial("PRICE_OUTSIDE_BAND", f"price={format_fixed(cmd.price)} band={format_fixed(band[0])}-"
                                                f"{format_fixed(band[1])}")
        denial = self._check(cmd.symbol, cmd.side, cmd.quantity, cmd.price, cmd.reduce_only, kernel, 0, 0, 0,
                             _TERMS[cmd.order_type] + _TIFS[cmd.time_in_force], cmd.trigger_price or 0)
        if denial is None and self.kelly_capital is not None and cmd.edge_win_prob is not None:
            return self._check_kelly(cmd, kernel)
        return denial

    def _check_kelly(self, cmd: SubmitOrder, kernel: Kernel) -> Denial | None:
        """Fractional Kelly (Kelly 1956): stake at most kelly_multiplier times f* = p - (1 - p) / b of the
        capital, capped at kelly_max_leverage; an edge that makes no sense is a denial, not an error."""
        p, b = cmd.edge_win_prob, cmd.edge_payoff
        if not (p is not None and b is not None and 0.0 <= p <= 1.0 and b > 0.0 and math.isfinite(b)):
            return Denial("KELLY_EDGE_INVALID", f"win_prob={p} payoff={b}")
        fraction = max(p - (1.0 - p) / b, 0.0) * self.limits.kelly_multiplier
        allowed = min(fraction, self.limits.kelly_max_leverage) * self.kelly_capital
        ref, _ = reference_price(kernel.market.get(cmd.symbol), kernel.ts_event)
        price = cmd.price if cmd.price is not None else ref
        notional = (cmd.quantity / SCALE) * (price / SCALE) * self.instruments[cmd.symbol].multiplier
        if notional > allowed:
            return Denial("KELLY_SIZE", f"notional={notional:.2f} limit={allowed:.2f} kelly_fraction={fraction:.4f}")
        return None

    def note_cancel(self, now: int) -> None:
        """A cancel passes whatever the limits (it only ever lowers risk) but counts as a message."""
        self.record_message(self.flow, now)

    def check_replace(self, cmd: ReplaceOrder, order: Order, kernel: Kernel) -> Denial | None:
        """A replace is checked as the order it would become, in place of the order it replaces."""
        qty = order.quantity if cmd.quantity is None else cmd.quantity
        price = order.price if cmd.price is None else cmd.price
        leaves = order.leaves_qty if order.is_open else 0
        buy, sell = (leaves, 0) if order.side is Side.BUY else (0, leaves)
        return self._check(
            cmd.symbol, order.side, qty - order.filled_qty, price, order.reduce_only, kernel, buy, sell,
            int(order.is_open), 0, 0,
        )

    def _check(
        self, symbol, side, qty, price, reduce_only, kernel, less_buy, less_sell, less_count, terms, trigger
    ) -> Denial | None:
        row_at = self.row_at.get(symbol)
        if row_at is None:
            return Denial("UNKNOWN_INSTRUMENT", f"symbol={symbol}")
        now = kernel.ts_event
        last = kernel.market.get(symbol)  # reference_price(), written out: this is the order path
        if last is None:
            ref = age = 0
        else:
            ref = (last.bid + last.ask) // 2 if type(last) is QuoteTick else last.close if type(last) is Bar else last.price
            age = now - last.ts_event
        portfolio = kernel.portfolio
        gross = portfolio.gross_exposure / SCALE
        code = self.check(
            self.engine, row_at, 1 if side is _BUY else -1, qty, price or 0, price is not None,
            reduce_only, ref, age, less_buy, less_sell, less_count, _STATES[kernel.state], gross,
            portfolio.net_exposure / SCALE, gross + self.working_value, now, terms, trigger,
        )
        if code != rc.OK:
            return Denial(rc.REASONS[code], self._detail(code, symbol))
        if self.book_var is not None:
            signed = qty if side is _BUY else -qty
            return self._check_var(symbol, signed / SCALE * self.instruments[symbol].multiplier)
        return None

    def _check_var(self, symbol: str, delta_units: float) -> Denial | None:
        result = self.book_var.check(symbol, delta_units)
        if result is None:
            return Denial("VAR_HISTORY_SHORT", f"scenarios={self.book_var.used} confidence={self.limits.var_confidence}")
        var_before, es_before, var_after, es_after, _ = result
        if self.max_var is not None and var_after > self.max_var and var_after > var_before:
            return Denial("MAX_VAR", f"var={var_after:.2f} limit={self.max_var:.2f}")
        if self.max_es is not None and es_after > self.max_es and es_after > es_before:
            return Denial("MAX_EXPECTED_SHORTFALL", f"es={es_after:.2f} limit={self.max_es:.2f}")
        return None

    # --- what the kernel tells the portfolio gate ----------------------------------------------------

    def on_mark(self, symbol: str, price: int, ts: int) -> None:
        if self.book_var is not None:
            self.book_var.on_mark(symbol, price / SCALE, ts)

    def on_position(self, symbol: str, quantity: int) -> None:
        self.cells[symbol][rc.S_POSITION] = quantity
        if self.book_var is not None:
            self.book_var.on_position(symbol, quantity / SCALE * self.instruments[symbol].multiplier)

    # --- state ---------------------------------------------------------------------------------

    def on_order(self, order: Order, was_open: bool, leaves_before: int, price_before: int | None) -> None:
        """Keep working quantities, counts, value and our best resting prices in step with an order's change.
        Each element of the engine's row is written only when it changes (an acknowledgement changes none)."""
        symbol, buy, is_open = order.symbol, order.side is _BUY, order.is_open
        cells = self.cells[symbol]
        leaves = order.leaves_qty if is_open else 0
        moved = leaves - (leaves_before if was_open else 0)
        if moved:
            cells[rc.S_OPEN_BUY if buy else rc.S_OPEN_SELL] += moved
        if is_open is not was_open:
            cells[rc.S_OPEN_ORDERS] += 1 if is_open else -1
        if price_before is None and order.price is None:
            return  # an order without a price is worth 0.0 here and rests at no price
        mult = self.instruments[symbol].multiplier
        limit = order.order_type is OrderType.LIMIT
        resting = self.resting[symbol][0 if buy else 1]
        if was_open:  # the value out and back in, as two steps: float sums must come out as they always have
            self.working_value -= _value(leaves_before, price_before, mult)
            if price_before is not None and limit:
                resting[price_before] -= 1
                if not resting[price_before]:
                    del resting[price_before]
        if is_open:
            self.working_value += _value(leaves, order.price, mult)
            if order.price is not None and limit:
                resting[order.price] = resting.get(order.price, 0) + 1
        if limit:
            cells[rc.S_OWN_BID if buy else rc.S_OWN_ASK] = (max(resting) if buy else min(resting)) if resting else 0

    # --- denial details -----------------------------------------------------------------------------

    def _detail(self, code: int, symbol: str) -> str:
        name = rc.REASONS[code]
        if name not in _DETAIL:
            return f"symbol={symbol}"
        value_label, limit_label, kind = _DETAIL[name]
        value, limit = self.account[rc.A_VALUE], self.account[rc.A_LIMIT]
        if kind == "fixed":  # quantities and prices, nanos
            text = format_fixed(int(value)), format_fixed(int(limit))
        elif kind == "lots_ticks":  # notional in lots times ticks, shown in money
            inst = self.instruments[symbol]
            unit = inst.lot_size * inst.tick_size // SCALE * inst.multiplier  # money nanos per lot-tick
            text = format_fixed(int(value) * unit), format_fixed(int(limit) * unit)
        elif kind == "ms":
            text = str(int(value) // 1_000_000), str(int(limit) // 1_000_000)
        elif kind == "count":
            text = str(int(value)), str(int(limit))
        else:  # money, float
            text = f"{value:.2f}", f"{limit:.2f}"
        return f"{value_label}={text[0]} {limit_label}={text[1]}"


# reason: (label of the value, label of the limit, how both print); the others print the symbol
_DETAIL = {
    "INVALID_LOT": ("qty", "lot", "fixed"),
    "INVALID_TICK": ("price", "tick", "fixed"),
    "MIN_ORDER_QTY": ("qty", "limit", "fixed"),
    "MAX_ORDER_QTY": ("qty", "limit", "fixed"),
    "STALE_REFERENCE_PRICE": ("age_ms", "limit_ms", "ms"),
    "MAX_ORDER_NOTIONAL": ("notional", "limit", "lots_ticks"),
    "PRICE_COLLAR_PCT": ("price_away", "reference", "fixed"),
    "PRICE_COLLAR_TICKS": ("price_away", "limit", "fixed"),
    "MAX_POSITION_LONG": ("worst_case", "limit", "fixed"),
    "MAX_POSITION_SHORT": ("worst_case", "limit", "fixed"),
    "MAX_OPEN_ORDERS": ("open_orders", "limit", "count"),
    "MAX_OPEN_QTY": ("open_qty", "limit", "fixed"),
    "MAX_GROSS_EXPOSURE": ("value", "limit", "money"),
    "MAX_NET_EXPOSURE": ("value", "limit", "money"),
    "CREDIT_LIMIT": ("value", "limit", "money"),
    "ORDER_THROTTLE": ("orders", "limit", "count"),
    "MESSAGE_THROTTLE": ("messages", "limit", "count"),
    "DUPLICATE_ORDER": ("age_ms", "window_ms", "ms"),
    "SELF_MATCH": ("price", "own_resting", "fixed"),
}
# an order's type and time in force as one nonzero number, for the duplicate key (risk_checks.py)
_TERMS = {t: 8 * (i + 1) for i, t in enumerate(OrderType)}
_TIFS = {t: i for i, t in enumerate(TimeInForce)}
_BUY = Side.BUY  # a module global: `Side.BUY` is an attribute lookup on the Enum class, 0.1 us in the order path
_STATES = {TradingState.ACTIVE: rc.ACTIVE, TradingState.REDUCING: rc.REDUCING, TradingState.HALTED: rc.HALTED}


def flow_state(limits: RiskLimits) -> np.ndarray:
    """The kernel's account flow array: limits and rings for the throttles and the duplicate check."""
    orders, messages = limits.max_orders_per_window, limits.max_messages_per_second
    slots = 64 if limits.duplicate_window_ms is not None else 0
    size = rc.F_HEADER + (orders or 0) + (messages or 0) + 2 * slots
    flow = np.zeros(size, dtype=np.int64)
    flow[rc.F_ORDER_LIMIT] = rc.UNLIMITED if orders is None else orders
    flow[rc.F_ORDER_WINDOW] = limits.order_window_ms * 1_000_000
    flow[rc.F_MSG_LIMIT] = rc.UNLIMITED if messages is None else messages
    flow[rc.F_MSG_WINDOW] = 1_000_000_000
    flow[rc.F_DUP_WINDOW] = 0 if limits.duplicate_window_ms is None else limits.duplicate_window_ms * 1_000_000
    flow[rc.F_DUP_SLOTS] = slots
    flow[rc.F_SELF_MATCH] = int(limits.self_match_prevention)
    return flow


def reference_price(last: QuoteTick | Bar | TradeTick | None, now: int) -> tuple[int, int]:
    """(reference price, its age in ns) from the last market data: a quote's mid, a bar's close, a trade's
    price; (0, 0) when there is none."""
    if last is None:
        return 0, 0
    if type(last) is QuoteTick:
        return (last.bid + last.ask) // 2, now - last.ts_event
    return (last.close if type(last) is Bar else last.price), now - last.ts_event


def _value(qty: int, price: int | None, multiplier: int) -> float:
    return 0.0 if price is None else (qty / SCALE) * (price / SCALE) * multiplier
