"""The pre-trade risk engine: every order command passes it before it can reach a venue.

One compiled kernel call per order (core/risk/checks.py) checks, in this order, the first that fails naming
the denial: trading state (HALTED, REDUCING), restricted list (no trade, reduce only), reduce-only orders,
lot and tick conformity, minimum and maximum quantity, reference price present and fresh, maximum notional,
price collars (basis points and ticks around the reference price), position limits long and short including
working orders, open orders and open quantity, the account's gross and net exposure (each instrument's worst
long and worst short, position plus working buys and position less working sells, at its reference price)
and credit (positions at market plus working orders at their prices, an order without a limit at the
reference moved by the collar), the order and message throttles, duplicate orders and self-match prevention.
An order that, with the working orders on its side, cannot take its position past flat is not held back by
position, exposure or credit limits; working orders whose cancel is on its way do not count against that (an
operator's flatten cancels them and closes the position in one input). Then, if configured, the portfolio
gate (core/risk/var.py): the book's historical VaR and expected shortfall after the order, each instrument
held as if its working orders had filled. Each order of an input is checked against what the ones before it
left. Before all of it, an order's prices must fit its type (a limit price for a limit order, a trigger for
a stop, whose trigger is then checked as a limit's price is).

Nothing an order carries can wrap the int64 arithmetic: the compiled check holds every sum and product at
int64's maximum (exact against every limit), no order is larger than QTY_MAX and all working orders of an
instrument together no larger than OPEN_QTY_MAX, and every limit has a range (core/risk/limits.py): a value
outside it, or not finite, is a configuration error that changes nothing.

Breakers and the repeated-execution throttle act on the trading state, not on single orders, the volatility
and price-band breakers pause single instruments (orders priced outside an instrument's band are denied),
and the market-wide breaker halts everything on a reference index's decline (core/risk/breakers.py). Orders that
carry the strategy's edge estimate are also capped by fractional Kelly sizing.

Configuration: `RiskLimits` (core/risk/limits.py), every field the default of every instrument and
`[risk.instruments.X]` overriding them for instrument X; a limit left unset is off.

The reference price is the last market data of the instrument that the kernel accepted: a quote's mid, a
bar's close, a trade's price; its age is measured in event time, from that data to the input being handled.
A denial is a value (`Denial`), never an exception; the kernel turns it into an `OrderDenied` event.

Every order passes here, so this module is compiled by mypyc (foxhunt/compiled.py); nanos become floats
through `fixed_point.ratio`, which divides two ints as Python does where mypyc would divide their doubles.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Final, NamedTuple, cast

import msgspec
import numpy as np

from foxhunt.core.effects import KernelView
from foxhunt.core.orders import Order
from foxhunt.core.risk import checks as rc
from foxhunt.core.risk.limits import OPEN_QTY_MAX, QTY_MAX, RiskLimits, effective
from foxhunt.core.risk.var import BookVar
from foxhunt.messages.base import SCALE, format_fixed, nanos
from foxhunt.messages.fixed_point import ratio, times
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import OrderType, ReplaceOrder, Side, SubmitOrder, TimeInForce
from foxhunt.messages.system import TradingState


class Denial(NamedTuple):
    reason: str
    detail: str


_RESTRICTED = {None: rc.OPEN, "open": rc.OPEN, "no_trade": rc.NO_TRADE, "reduce_only": rc.REDUCE_ONLY_LIST}


def _limit_or_off(value: Decimal | int | None, convert=nanos) -> int:
    return rc.UNLIMITED if value is None else convert(value)


def limit_row(defaults: RiskLimits, inst: Instrument) -> np.ndarray:
    """The kernel's int64 limit row for one instrument, the instrument's overrides applied."""

    def pick(field: str):
        return effective(defaults, inst.symbol, field)

    row = np.full(rc.ROW_FIELDS, rc.UNLIMITED, dtype=np.int64)
    row[rc.L_LOT], row[rc.L_TICK], row[rc.L_MULT] = inst.lot_size, inst.tick_size, inst.multiplier
    row[rc.L_MIN_QTY] = 0 if pick("min_order_qty") is None else nanos(pick("min_order_qty"))
    # no order is larger than QTY_MAX, nor are all working orders together larger than OPEN_QTY_MAX, so that
    # the engine's sums of working quantities stay far inside int64
    row[rc.L_MAX_QTY] = min(_limit_or_off(pick("max_order_qty")), QTY_MAX)
    notional = pick("max_order_notional")
    if notional is not None:  # money nanos = lots*lot * ticks*tick * multiplier / SCALE, so in lots times ticks:
        lots_ticks = nanos(notional) * SCALE // (inst.lot_size * inst.tick_size * inst.multiplier)
        row[rc.L_MAX_NOTIONAL_LT] = min(lots_ticks, rc.UNLIMITED)
    row[rc.L_COLLAR_BPS] = _limit_or_off(pick("collar_bps"), int)
    row[rc.L_COLLAR_TICKS] = _limit_or_off(pick("collar_ticks"), int)
    row[rc.L_MAX_LONG] = _limit_or_off(pick("max_position_long"))
    row[rc.L_MAX_SHORT] = _limit_or_off(pick("max_position_short"))
    row[rc.L_MAX_OPEN_ORDERS] = _limit_or_off(pick("max_open_orders"), int)
    row[rc.L_MAX_OPEN_QTY] = min(_limit_or_off(pick("max_open_qty")), OPEN_QTY_MAX)
    row[rc.L_REF_MAX_AGE] = _limit_or_off(pick("reference_max_age_ms"), lambda ms: ms * 1_000_000)
    row[rc.L_RESTRICTED] = _RESTRICTED[pick("restricted")]
    row[rc.L_PAUSED :] = 0  # no pause, and the state of an instrument with no orders and no position
    return row


class PreTradeGate:
    """The pre-trade gate (the kernel's `gate`): every order command's check, and the state it checks
    against, kept in one int64 array the compiled check reads (core/risk/checks.py)."""

    def __init__(self, limits: RiskLimits, instruments: dict[str, Instrument]) -> None:
        self.instruments = instruments
        # each instrument's multiplier as a plain int: read by every order event, where an Instrument's field
        # is Python's attribute lookup
        self.multipliers = {symbol: inst.multiplier for symbol, inst in instruments.items()}
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
        self.resting: dict[str, tuple[dict[int, int], dict[int, int]]] = {symbol: ({}, {}) for symbol in instruments}
        self.working_value = 0.0  # the working orders' worth, money: their prices, or `worth`
        self.worth: dict[str, int] = {}  # order id -> the price a working order without a limit is valued at
        self._worth = 0  # the last check's

    def configure(self, limits: RiskLimits) -> None:
        """Take new limits, in full, from the input that sets them: working orders stay counted, and what the
        throttles' and the duplicate check's windows hold is carried over (the newest entries a smaller ring
        can hold), so tightening a limit never grants a fresh budget. ValueError, naming what is wrong,
        changes nothing."""
        unknown = sorted(set(limits.instruments) - set(self.instruments))
        if unknown:
            raise ValueError(f"risk limits for instruments that are not configured: {', '.join(unknown)}")
        if limits.market_index is not None and limits.market_index not in self.instruments:
            raise ValueError(f"market_index {limits.market_index!r} is not a configured instrument")
        rows = {symbol: limit_row(limits, inst) for symbol, inst in self.instruments.items()}
        for symbol, row in self.rows.items():  # a breaker's pause and the instrument's state are not limits
            rows[symbol][rc.L_PAUSED :] = row[rc.L_PAUSED :]
        off = float("inf")
        account = [off if v is None else float(v) for v in
                   (limits.max_gross_exposure, limits.max_net_exposure, limits.credit_limit)] + [0.0, 0.0]
        flow = carry_flow(self.flow, flow_state(limits)) if self.flow.size else flow_state(limits)
        symbols = sorted(self.instruments)
        for i, symbol in enumerate(symbols):
            rows[symbol][rc.S_INSTRUMENT] = i
        book_var = self.book_var
        if limits.max_var is not None or limits.max_expected_shortfall is not None:
            book_var = (BookVar(symbols, limits.var_window, limits.var_sample_ms * 1_000_000, limits.var_confidence)
                        if book_var is None else book_var.reconfigured(
                            limits.var_window, limits.var_sample_ms * 1_000_000, limits.var_confidence))
        # nothing above changed the engine: from here on, the new limits apply in full
        self.limits = limits
        self.engine = rc.engine_state(np.array(account), [rows[s] for s in symbols], flow)
        self.row_at = {s: rc.E_ROWS + i * rc.ROW_FIELDS for i, s in enumerate(symbols)}
        # each instrument's collars (bps, ticks, its tick), as plain ints: what bounds an order without a limit
        # is read twice an order, and a limit changes only here
        self.collars = {s: (int(rows[s][rc.L_COLLAR_BPS]), int(rows[s][rc.L_COLLAR_TICKS]), int(rows[s][rc.L_TICK]))
                        for s in symbols}
        self._views()
        self.book_var = book_var
        self.kelly_capital = None if limits.kelly_capital is None else float(limits.kelly_capital)
        self.max_var = None if limits.max_var is None else float(limits.max_var)
        self.max_es = None if limits.max_expected_shortfall is None else float(limits.max_expected_shortfall)
        self.exposure_on = limits.max_gross_exposure is not None or limits.max_net_exposure is not None

    def _views(self) -> None:
        """The views into the engine's one array that the engine updates it through."""
        self.rows = {s: self.engine[at : at + rc.ROW_FIELDS] for s, at in self.row_at.items()}
        # the same rows as memoryviews, for the order path's bookkeeping: an element read or written through
        # a memoryview is a plain int, about half the cost of a numpy element's
        self.cells: dict[str, memoryview] = {
            s: memoryview(row) for s, row in self.rows.items()}  # type: ignore[arg-type]  # numpy's stubs
        self.account = self.engine[rc.E_ACCOUNT : rc.E_ROWS].view(np.float64)
        self.flow = self.engine[self.engine[rc.E_FLOW_AT] :]

    # A kernel snapshot (runtime/snapshots.py) pickles the engine: its one array goes whole, the views into
    # it and the compiled check are made again, so the restored views still share the array. Compiled by
    # mypyc, the class has no __dict__ but lists its attributes in __mypyc_attrs__.
    def __getstate__(self) -> dict:
        names = getattr(type(self), "__mypyc_attrs__", None) or vars(self)
        return {k: getattr(self, k) for k in names if k not in _REMADE}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        compiled = rc.kernels()
        self.check, self.record_message = compiled.check_order_nb, compiled.record_message_nb
        self._views()

    def digest_state(self) -> object:
        """The engine's decision state for the kernel's digest: its one array (limits, positions, working
        orders, marks, pauses, the throttles' and duplicate check's rings), the working orders' worth, our
        resting prices, the bands, and the VaR book's scenarios."""
        resting = [[symbol, sorted(bids.items()), sorted(asks.items())] for symbol, (bids, asks) in
                   sorted(self.resting.items())]
        var = None
        if self.book_var is not None:
            b = self.book_var
            var = [b.returns.tobytes(), b.marks.tobytes(), b.sampled.tobytes(), b.exposure.tobytes(), b.used,
                   b.head, b.next_sample]
        return [self.engine.tobytes(), self.working_value, sorted(self.worth.items()), resting,
                sorted(self.bands.items()), var]

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
            self.configure(msgspec.convert(raw, RiskLimits, strict=False))
        except (msgspec.ValidationError, ValueError) as e:
            raise ValueError(f"risk limit {name}={text!r}: {e}") from None
        return ("off" if previous is None else str(previous)), text

    # --- checks ----------------------------------------------------------------------------------

    def check_submit(self, cmd: SubmitOrder, view: KernelView, order: Order | None = None) -> Denial | None:
        """The new order `cmd`'s denial, or None where it passes. `order` is the kernel's Order made of it
        (Order.from_command, made here where not given): its terms are read from there, a native object's
        fields where compiled, rather than from the message again."""
        if order is None:
            order = Order.from_command(cmd)
        kind, price, trigger, quantity = order.order_type, order.price, order.trigger_price, order.quantity
        if (price is None) is (kind is _LIMIT) or (trigger is None) is (kind is _STOP):
            return Denial("INVALID_ORDER_TERMS", terms_problem(kind, price, trigger))
        priced = price if kind is _LIMIT else trigger  # a stop's trigger
        symbol = order.symbol
        band = self.bands.get(symbol)
        if band is not None and priced is not None and not band[0] <= priced <= band[1]:
            return Denial("PRICE_OUTSIDE_BAND", f"price={format_fixed(priced)} band={format_fixed(band[0])}-"
                                                f"{format_fixed(band[1])}")
        denial = self._check(symbol, order.side, quantity, quantity, priced, order.reduce_only, view,
                             0, 0, 0, _TERMS[kind] + _TIFS[order.time_in_force], trigger or 0)
        if denial is None and self.kelly_capital is not None and cmd.edge_win_prob is not None:
            denial = self._check_kelly(cmd, view)
        if denial is None and kind is not _LIMIT:
            self.worth[order.order_id] = self._worth
        return denial

    def _check_kelly(self, cmd: SubmitOrder, view: KernelView) -> Denial | None:
        """Fractional Kelly (Kelly 1956): stake at most kelly_multiplier times f* = p - (1 - p) / b of the
        capital, capped at kelly_max_leverage; an edge that makes no sense is a denial, not an error."""
        p, b = cmd.edge_win_prob, cmd.edge_payoff
        kelly = self.kelly_allowance(p, b)
        if kelly is None:
            return Denial("KELLY_EDGE_INVALID", f"win_prob={p} payoff={b}")
        fraction, allowed = kelly
        ref, _ = reference_price(view.market.get(cmd.symbol), view.ts_event)
        price = cmd.price if cmd.price is not None else ref
        notional = ratio(cmd.quantity, SCALE) * ratio(price, SCALE) * self.instruments[cmd.symbol].multiplier
        if notional > allowed:
            return Denial("KELLY_SIZE", f"notional={notional:.2f} limit={allowed:.2f} kelly_fraction={fraction:.4f}")
        return None

    def kelly_allowance(self, p: float | None, b: float | None) -> tuple[float, float] | None:
        """(kelly_multiplier * f*, the notional it allows) for win probability `p` and payoff `b`; None when
        the edge makes no sense (or no Kelly capital is configured)."""
        if self.kelly_capital is None or not (
                p is not None and b is not None and 0.0 <= p <= 1.0 and b > 0.0 and math.isfinite(b)):
            return None
        fraction = max(p - (1.0 - p) / b, 0.0) * self.limits.kelly_multiplier  # float division
        return fraction, min(fraction, self.limits.kelly_max_leverage) * self.kelly_capital

    def kelly_quantity(self, symbol: str, p: float, b: float, view: KernelView) -> int | None:
        """The largest quantity (nanos) of `symbol` at its reference price whose notional the Kelly check
        allows for this edge; None where no Kelly capital is configured or there is no reference price."""
        kelly = self.kelly_allowance(p, b)
        ref, _ = reference_price(view.market.get(symbol), view.ts_event)
        if kelly is None or not ref:
            return None
        return int(kelly[1] / (ratio(ref, SCALE) * self.instruments[symbol].multiplier) * SCALE)  # float division

    def note_cancel(self, now: int) -> None:
        """A cancel passes whatever the limits (it only ever lowers risk) but counts as a message."""
        self.record_message(self.flow, now)

    def check_replace(self, cmd: ReplaceOrder, order: Order, view: KernelView) -> Denial | None:
        """A replace is checked as the order it would become, in place of the order it replaces: its new
        total quantity against the order-size limits, what would be left of it against the rest."""
        price = order.price if cmd.price is None else cmd.price
        trigger = order.trigger_price if cmd.trigger_price is None else cmd.trigger_price
        problem = terms_problem(order.order_type, price, trigger)
        if problem:
            return Denial("INVALID_ORDER_TERMS", problem)
        total = order.quantity if cmd.quantity is None else cmd.quantity
        if total <= order.filled_qty:
            return Denial("REPLACE_BELOW_FILLED", f"qty={format_fixed(total)} filled={format_fixed(order.filled_qty)}")
        leaves = order.leaves_qty if order.is_open else 0
        buy, sell = (leaves, 0) if order.side is _BUY else (0, leaves)
        priced = price if order.order_type is _LIMIT else trigger
        return self._check(
            cmd.symbol, order.side, total - order.filled_qty, total, priced, order.reduce_only, view, buy, sell,
            int(order.is_open), 0, 0,
        )

    def _check(
        self, symbol: str, side: Side, qty: int, total: int, price: int | None, reduce_only: bool, view: KernelView,
        less_buy: int, less_sell: int, less_count: int, terms: int, trigger: int,
    ) -> Denial | None:
        row_at = self.row_at.get(symbol)
        if row_at is None:
            return Denial("UNKNOWN_INSTRUMENT", f"symbol={symbol}")
        now = view.ts_event
        last = view.market.get(symbol)  # reference_price(), written out: this is the order path
        if last is None:
            ref = age = 0
        else:
            kind = type(last)
            if kind is _QUOTE:
                quote = cast(QuoteTick, last)
                ref = (quote.bid + quote.ask) // 2
            else:
                ref = cast(Bar, last).close if kind is _BAR else cast(TradeTick, last).price
            age = now - last.ts_event
        # what an order is worth for credit: its price, or (a market or stop order) the worst price the
        # collar lets it trade at above the reference
        worth = self._worth = price if price is not None else min(ref + self._collar_room(symbol, ref), _UNLIMITED)
        credit_used = ratio(view.portfolio.gross_exposure, SCALE) + self.working_value
        canceling = 0
        if view.cancels_pending and less_count == 0:  # a new order: what on its side is being canceled
            open_orders = view.orders.open
            canceling = sum(o.leaves_qty for o in map(open_orders.get, view.cancels_pending)
                            if o is not None and o.symbol == symbol and o.side is side)
        code = self.check(
            self.engine, row_at, 1 if side is _BUY else -1, qty, total, price or 0, price is not None,
            reduce_only, ref, age, less_buy, less_sell, less_count, canceling, _STATES[view.trading.state], credit_used,
            worth, view.now_ns, terms, trigger,
        )
        if code != _OK:
            return Denial(_REASONS[code], self._detail(code, symbol))
        if self.book_var is not None:
            signed = qty if side is _BUY else -qty
            denial = self._check_var(self.book_var, symbol, ratio(signed, SCALE) * self.instruments[symbol].multiplier)
            if denial is not None:
                return denial
        return None

    def beyond_collar(self, symbol: str, price: int, ref: int) -> str:
        """Why `price` lies beyond the instrument's collars around the reference `ref` ("" if it does not,
        or there is no reference or no collar): what bounds a fill of an order without a limit."""
        bps, ticks, tick = self.collars[symbol]
        away = abs(price - ref)
        if ref > 0 and bps != _UNLIMITED and away > self._collar_room(symbol, ref):  # away > floor(ref * bps / 1e4)
            return f"{format_fixed(away)} from the reference {format_fixed(ref)}, beyond the collar of {bps} bps"
        if ref > 0 and ticks != _UNLIMITED and away > ticks * tick:
            return f"{format_fixed(away)} from the reference {format_fixed(ref)}, beyond the collar of {ticks} ticks"
        return ""

    def _collar_room(self, symbol: str, ref: int) -> int:
        bps = self.collars[symbol][0]
        return 0 if bps == _UNLIMITED else times(ref, bps) // 10_000

    def _check_var(self, book_var: BookVar, symbol: str, delta_units: float) -> Denial | None:
        result = book_var.check(symbol, delta_units)
        if result is None:
            return Denial("VAR_HISTORY_SHORT", f"scenarios={book_var.used} confidence={self.limits.var_confidence}")
        var_before, es_before, var_after, es_after, _ = result
        if self.max_var is not None and var_after > self.max_var and var_after > var_before:
            return Denial("MAX_VAR", f"var={var_after:.2f} limit={self.max_var:.2f}")
        if self.max_es is not None and es_after > self.max_es and es_after > es_before:
            return Denial("MAX_EXPECTED_SHORTFALL", f"es={es_after:.2f} limit={self.max_es:.2f}")
        return None

    # --- what the kernel tells the portfolio gate ----------------------------------------------------

    def on_mark(self, symbol: str, price: int, ts: int) -> None:
        if self.book_var is not None:
            self.book_var.on_mark(symbol, ratio(price, SCALE), ts)

    def on_position(self, symbol: str, quantity: int) -> None:
        self.cells[symbol][_S_POSITION] = quantity
        if self.book_var is not None:
            self._var_exposure(self.book_var, symbol)

    def _var_exposure(self, book_var: BookVar, symbol: str) -> None:
        """The VaR book holds each instrument as if its working orders had filled: position plus working buys
        less working sells."""
        cells = self.cells[symbol]
        held = ratio(cells[_S_POSITION] + cells[_S_OPEN_BUY] - cells[_S_OPEN_SELL], SCALE)
        book_var.on_position(symbol, held * self.instruments[symbol].multiplier)

    def on_reference(self, symbol: str, price: int) -> None:
        """The instrument's reference price, for the account's exposure (while its limits are on)."""
        self.cells[symbol][_S_MARK] = price

    # --- state ---------------------------------------------------------------------------------

    def on_order(self, order: Order, was_open: bool, leaves_before: int, price_before: int | None) -> None:
        """Keep working quantities, counts, value and our best resting prices in step with an order's change.
        Each element of the engine's row is written only when it changes (an acknowledgement changes none).
        An order without a price is worth what the check valued it at (`worth`)."""
        symbol, buy, is_open = order.symbol, order.side is _BUY, order.is_open
        cells = self.cells[symbol]
        leaves = order.leaves_qty if is_open else 0
        moved = leaves - (leaves_before if was_open else 0)
        if moved:
            cells[_S_OPEN_BUY if buy else _S_OPEN_SELL] += moved
            if self.book_var is not None:
                self._var_exposure(self.book_var, symbol)
        if is_open is not was_open:
            cells[_S_OPEN_ORDERS] += 1 if is_open else -1
        mult = self.multipliers[symbol]
        worth = self.worth.get(order.order_id)
        limit = order.order_type is _LIMIT
        if was_open:  # the value out and back in, as two steps: float sums must come out as they always have
            self.working_value -= _value(leaves_before, price_before if worth is None else worth, mult)
        if is_open:
            self.working_value += _value(leaves, order.price if worth is None else worth, mult)
        elif worth is not None:
            del self.worth[order.order_id]
        if limit:  # our resting prices, for self-match prevention: only limit orders rest
            resting = self.resting[symbol][0 if buy else 1]
            if was_open and price_before is not None:
                resting[price_before] -= 1
                if not resting[price_before]:
                    del resting[price_before]
            if is_open and order.price is not None:
                resting[order.price] = resting.get(order.price, 0) + 1
            cells[_S_OWN_BID if buy else _S_OWN_ASK] = (max(resting) if buy else min(resting)) if resting else 0

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
_REMADE = ("check", "record_message", "rows", "cells", "account", "flow")  # not in a snapshot: made again
# an order's type and time in force as one nonzero number, for the duplicate key (risk_checks.py)
_TERMS: Final = {t: 8 * (i + 1) for i, t in enumerate(OrderType)}
_TIFS: Final = {t: i for i, t in enumerate(TimeInForce)}
# What the order path reads as Final names: compiled by mypyc, a Final is a C static, where a module global is
# a lookup in the module's namespace, and `rc.X` one in another module's (`Side.BUY`, through the Enum class,
# costs 0.1 us).
_LIMIT: Final = OrderType.LIMIT
_STOP: Final = OrderType.STOP
_BUY: Final = Side.BUY
_STATES: Final = {TradingState.ACTIVE: rc.ACTIVE, TradingState.REDUCING: rc.REDUCING, TradingState.HALTED: rc.HALTED}
_QUOTE: Final = QuoteTick
_BAR: Final = Bar
_UNLIMITED: Final = rc.UNLIMITED
_OK: Final = rc.OK
_REASONS: Final = rc.REASONS
_S_POSITION: Final = rc.S_POSITION
_S_OPEN_BUY: Final = rc.S_OPEN_BUY
_S_OPEN_SELL: Final = rc.S_OPEN_SELL
_S_OPEN_ORDERS: Final = rc.S_OPEN_ORDERS
_S_OWN_BID: Final = rc.S_OWN_BID
_S_OWN_ASK: Final = rc.S_OWN_ASK
_S_MARK: Final = rc.S_MARK


def terms_problem(order_type: OrderType, price: int | None, trigger: int | None) -> str:
    """What is wrong with an order's prices for its type ("" if nothing): a limit order has a limit price,
    a stop order a trigger price, a market order neither; only a stop has a trigger."""
    if (price is not None) != (order_type is OrderType.LIMIT):
        return f"a {order_type.value} order {'needs a' if price is None else 'takes no'} limit price"
    if (trigger is not None) != (order_type is OrderType.STOP):
        return f"a {order_type.value} order {'needs a' if trigger is None else 'takes no'} trigger price"
    return ""


def flow_state(limits: RiskLimits) -> np.ndarray:
    """The kernel's account flow array: limits and rings for the throttles and the duplicate check. The
    duplicate ring holds as many orders as the order throttle lets through in the duplicate window (at
    least 64; 4,096 when the throttle is off), so an order's twin cannot slip past it inside its window."""
    orders, messages = limits.max_orders_per_window, limits.max_messages_per_second
    slots = 0
    if limits.duplicate_window_ms is not None:
        windows = -(-limits.duplicate_window_ms // limits.order_window_ms)  # order windows one duplicate window spans
        slots = 4096 if orders is None else max(64, min(orders * windows, 1_000_000))
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


# the flow's rings: where each says its size and its head, and how many numbers an entry is
_RINGS = ((rc.F_ORDER_LIMIT, rc.F_ORDER_HEAD, 1), (rc.F_MSG_LIMIT, rc.F_MSG_HEAD, 1), (rc.F_DUP_SLOTS, rc.F_DUP_HEAD, 2))


def _rings(flow: np.ndarray) -> list[list[int]]:
    """The flow's three rings as lists, oldest first: order times, message times, and (key, time) pairs
    flattened (empty where a ring is off)."""
    out = []
    at = rc.F_HEADER
    for limit_at, head_at, width in _RINGS:
        size = 0 if flow[limit_at] == rc.UNLIMITED else int(flow[limit_at])
        head = int(flow[head_at])
        entries = [flow[at + width * ((head + i) % size) : at + width * ((head + i) % size) + width].tolist()
                   for i in range(size)] if size else []
        out.append([value for entry in entries if entry[-1] != 0 for value in entry])  # used slots, oldest first
        at += width * size
    return out


def carry_flow(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """`new`'s limits with what `old`'s rings hold: the newest entries that each new ring has room for,
    oldest first, so a throttle that was tightened counts the orders already in its window."""
    at = rc.F_HEADER
    for (limit_at, head_at, width), kept in zip(
        _RINGS, _rings(old),
    ):
        size = 0 if new[limit_at] == rc.UNLIMITED else int(new[limit_at])
        kept = kept[len(kept) - width * size :] if size else []
        new[at : at + len(kept)] = kept
        new[head_at] = len(kept) // width % size if size else 0
        at += width * size
    return new


def reference_price(last: QuoteTick | Bar | TradeTick | None, now: int) -> tuple[int, int]:
    """(reference price, its age in ns) from the last market data: a quote's mid, a bar's close, a trade's
    price; (0, 0) when there is none."""
    if last is None:
        return 0, 0
    if type(last) is QuoteTick:
        return (last.bid + last.ask) // 2, now - last.ts_event
    return (last.close if type(last) is Bar else cast(TradeTick, last).price), now - last.ts_event


def _value(qty: int, price: int | None, multiplier: int) -> float:
    return 0.0 if price is None else ratio(qty, SCALE) * ratio(price, SCALE) * multiplier
