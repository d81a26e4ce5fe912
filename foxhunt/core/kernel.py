"""The deterministic kernel: one input in, handled to quiescence, derived events and venue commands out.

Live trading and replay call `Kernel.handle` with the same inputs in the same order and get the same
bytes back. The kernel reads time only from the input it is handling, draws randomness only from
generators seeded by the run's `RunStarted`, and names orders after the input's sequence number.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from typing import Any, Final, cast

import msgspec

from foxhunt.core.context import StrategyContext
from foxhunt.core.operator import Operator
from foxhunt.core.orders import Order, Orders, booked, duplicate, refusal
from foxhunt.core.portfolio import Portfolio, Position
from foxhunt.core.risk.gate import PreTradeGate, reference_price
from foxhunt.core.risk.repeats import NEVER, RepeatedDenials
from foxhunt.core.risk.safeguards import Safeguards
from foxhunt.core.step import Step
from foxhunt.core.strategy import Strategy
from foxhunt.core.trading_state import Cause, TradingStates
from foxhunt.messages.base import Derived, Input, format_fixed
from foxhunt.messages.fixed_point import INT64_MAX
from foxhunt.messages.market import Bar, Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import (
    CancelOrder,
    CommissionReported,
    DenialsRepeated,
    DuplicateFillIgnored,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderEvent,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderReportRefused,
    OrderSubmitted,
    OrdersUncertain,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)
from foxhunt.messages.scores import ModelFailed, ModelScored, ModelsLoaded, PolicyActed, ScoreRefused
from foxhunt.messages.system import (
    AdminCommand,
    ClockHeld,
    ConfigReloaded,
    FeedGap,
    JournalDegraded,
    JournalRecovered,
    MarketDataFlagged,
    PositionChanged,
    RunStarted,
    RunStopped,
    TimerFired,
    TradingState,
    TradingStateChanged,
    VenueConnected,
    VenueDisconnected,
    VenueMessageIgnored,
    VenueMessageRejected,
    VenueSessionEvent,
)

# What the order path compares with, as Final names: compiled by mypyc, a Final is a C static, where a module
# global is a lookup in the module's namespace, and `Side.BUY` one through the Enum class (0.1 us)
_SUBMIT: Final = SubmitOrder
_CANCEL: Final = CancelOrder
_REPLACE: Final = ReplaceOrder
_FILL: Final = OrderFilled
_PARTIAL_FILL: Final = OrderPartiallyFilled
_REPLACED: Final = OrderReplaced
_LIMIT: Final = OrderType.LIMIT
_BUY: Final = Side.BUY

# A strategy that answers every event with a new request would never let an input end.
MAX_ROUNDS = 1000


# What the kernel derives from its inputs, as a version: raised with every change that makes it derive
# other events from the same inputs, and journaled with each run (the "kernel" of RunStarted's fingerprint),
# so that a verify that diverges on a journal an earlier kernel recorded says so. Journals from before it
# was journaled count as 1. 2: VenueDisconnected derives OrdersUncertain, cancels are held while a venue
# is down and asked again when it is back, cancel_on_reconnect is the kernel's; only a cancel's refusal
# (not a replace's) answers a pending cancel; a report the order's lifecycle does not allow derives
# OrderReportRefused (and, for a fill, a halt), where the kernel raised before. 3: the kernel forgets the
# orders closed before its newest orders.CLOSED_KEPT closed ones, so a report for one is refused as for an
# unknown order, and an operator's command naming one is refused as naming an unknown order. 4: a fill is
# booked once, by the execution ids each order has applied (DuplicateFillIgnored), and one without an
# execution id by the venue's cumulative quantity; an order's status after a fill follows its quantities
# (reports out of order); a fill of no quantity or price, or beyond its order's limit, is refused; a
# VenueMessageRejected tightens trading as the venue's policy asks; a CommissionReported after its fill is
# booked once. 5 (the gate under hostile inputs): exposure, credit and VaR count working orders, and an
# order reduces only with the working orders on its side; market orders are worth their collar-bounded
# price; a malformed request, an order whose prices do not fit its type, a replace beyond the order-size
# limits on its total are denied; a fill off the lot, beyond the collar (no limit) or past the position
# bound, and an unrequested replace, are refused; a final fill short of the quantity leaves the order
# working; limit changes carry the throttles' windows over; max_repeated_executions fills halt (was one
# more); market data priced at or below zero or past int64 is flagged; a fill behind its order's cancel or
# expiry is booked (was refused, and halted trading). (The us_equities rulebook came with
# the same version: it derives nothing unless configured, and around_the_clock is the bands and
# market-wide breaker of before.) 6: the order and message throttles, the duplicate window and the
# repeated-execution window measure on the run's clock (the latest ts_init, `now_ns`), not on the ts_event
# of the input being handled; a fill off its instrument's execution tick is refused; a refused fill
# tightens to `refused_fill_action` (halt, as before, unless configured to reduce). 7 (the incident record):
# a denial that repeats one inside `repeated_denial_window_ms` (same strategy, symbol, request, side and
# reason) is held back, its request with it, and summarised by a DenialsRepeated when its window closes
# (core/risk/repeats.py); the strategies hear of every change of the trading state; the reference strategies
# ask for nothing the state forbids (ema_cross: nothing while HALTED, only towards flat while REDUCING;
# zscore: enters only while ACTIVE, cancels its resting entries when trading turns REDUCING) and do not ask
# again for an order the gate denied until something it depended on changed (core/strategy.py). 8 (models in
# the loop): a ModelScored reaches the strategies (Strategy.on_score) once checked (score_problem), and one
# that cannot be used derives ScoreRefused and tightens trading to REDUCING, as a ModelFailed does;
# ModelsLoaded changes nothing. (The reference strategies now reach their targets through
# StrategyContext.trade_towards, which asks for the orders they asked for before.)
BEHAVIOUR = 8


PRICE_MAX: Final = INT64_MAX  # market data priced above it (or at or below 0) is flagged, not traded on
_TAGGED: Final = 2**62 - 1  # the largest int mypyc holds unboxed: compared with first, a compare in C
POSITION_MAX: Final = 2**62  # a fill that would take a position beyond +-this is refused: the engine's sums stay exact


class KernelError(Exception):
    """An input the kernel cannot handle: a bug upstream, never a market outcome."""


AGAIN = " (asked again: venue "  # marks a cancel the kernel asks for again (_on_venue_connected)


class Kernel:
    def __init__(self, instruments: dict[str, Instrument], strategies: list[Strategy], gate: PreTradeGate):
        self.instruments = instruments
        self.strategies = strategies
        self.gate = gate
        self.orders = Orders()
        self.portfolio = Portfolio()
        self.trading = TradingStates()  # ACTIVE, REDUCING, HALTED, and what each cause does (core/trading_state.py)
        self.market: dict[str, QuoteTick | Bar | TradeTick] = {}  # last usable market data per symbol
        self.venues_down: set[str] = set()
        # working orders whose cancel is asked for and not yet answered, with the cancel's reason: held
        # while the venue is down, and asked again once it is back (a cancel lost with the connection)
        self.cancels_pending: dict[str, str] = {}
        # working orders whose replace went to the venue and is not yet answered: a venue's OrderReplaced is
        # admitted only for one of them, and only on terms that were asked for
        self.replaces_pending: dict[str, ReplaceOrder] = {}
        self.seed: int | None = None
        self.run: RunStarted | None = None  # the start of the run the inputs are of
        self.requests: list[SubmitOrder | CancelOrder | ReplaceOrder] = []
        self.contexts = {s.strategy_id: StrategyContext(self, s.strategy_id) for s in strategies}
        # who hears of an order's events: the strategies whose class overrides on_order_event (the base's does
        # nothing, and an order has three events or more)
        self._by_strategy: dict[str, list[tuple[Strategy, StrategyContext]]] = {}
        for s in strategies:
            if type(s).on_order_event is not Strategy.on_order_event:
                self._by_strategy.setdefault(s.strategy_id, []).append((s, self.contexts[s.strategy_id]))
        self.paused: set[str] = set()  # strategies an operator paused: they see no market data or timers
        self.running = list(strategies)  # the strategies not paused, in configuration order
        # resolved once per pause or resume: the quote path runs for every tick
        self._quote_handlers = [(s.on_quote, self.contexts[s.strategy_id]) for s in strategies]
        self.seq = 0
        self.ts_event = 0
        self.ts_init = 0
        # the run's clock as the kernel has seen it: the latest ts_init, which never goes backwards (the live
        # clock holds on a step back; this holds on an input taken in earlier that reached the bus later).
        # The throttles and the repeated-execution window measure on it; the market's own windows and the
        # age of market data measure on ts_event, the time the market gave.
        self.now_ns = 0
        self.safeguards = Safeguards(gate, instruments, self.portfolio, self)
        self.operator = Operator(self, self.safeguards.breakers)
        self.repeats = RepeatedDenials(0)  # the denials held back, per window (core/risk/repeats.py)
        self._repeats_due = NEVER  # repeats.due_ns, as a native int: every input compares the clock with it
        self.limits_version = 0
        self.follow_limits()
        self._order_counter = 0
        # scratch lists reused for every input (copied out only when something was derived): most quotes
        # derive nothing, and allocating two lists per quote wakes the garbage collector for nothing
        self._derived: list[Derived] = []
        self._commands: list[SubmitOrder | CancelOrder | ReplaceOrder] = []
        # what handles each kind of input: one lookup by exact type (messages are final classes)
        self._handlers: dict[type, Callable[[Any], None]] = {
            QuoteTick: self._on_quote,
            Bar: self._on_bar,
            TradeTick: self._on_trade,
            OrderAccepted: self._on_report,
            OrderRejected: self._on_report,
            OrderCanceled: self._on_report,
            OrderCancelRejected: self._on_report,
            OrderReplaced: self._on_report,
            OrderExpired: self._on_report,
            OrderPartiallyFilled: self._on_fill,
            OrderFilled: self._on_fill,
            CommissionReported: self._on_commission,
            RunStarted: self._on_run_started,
            TimerFired: self._on_timer,
            AdminCommand: self.operator.on_admin,
            ConfigReloaded: self.operator.on_config_reloaded,
            JournalDegraded: self._on_journal_degraded,
            JournalRecovered: self._on_journal_recovered,
            VenueConnected: self._on_venue_connected,
            VenueDisconnected: self._on_venue_disconnected,
            RunStopped: self._on_run_stopped,
            FeedGap: _ignore,
            ClockHeld: _ignore,
            VenueSessionEvent: _ignore,
            VenueMessageIgnored: _ignore,
            VenueMessageRejected: self._on_venue_message_rejected,
            ModelScored: self._on_score,
            ModelFailed: self._on_model_failed,
            ModelsLoaded: _ignore,
            PolicyActed: self._on_action,
        }

    # --- the one entry point ---------------------------------------------------------------------

    def handle(self, seq: int, msg: Input) -> Step:
        self.seq = seq
        self.ts_event = msg.ts_event
        ts_init = self.ts_init = msg.ts_init
        if ts_init > self.now_ns:  # noqa: PLR1730 - every input passes here: a compare, not a call
            self.now_ns = ts_init
        self._order_counter = 0
        derived = self._derived
        kind = type(msg)
        handler = self._handlers.get(kind)
        if handler is None:
            raise KernelError(f"kernel does not handle {kind.__name__}")
        try:
            if self.now_ns >= self._repeats_due:  # a window of held-back denials has ended: its summary
                self._close_repeats(msg, self.now_ns)
            handler(msg)
            if self.requests:
                self._drain_requests()
        except BaseException:  # a bug (every input the kernel can meet is handled): nothing of it stays behind
            derived.clear()
            self._commands.clear()
            self.requests.clear()
            raise
        if not derived:
            return _NOTHING
        step = Step(derived.copy(), self._commands.copy())
        derived.clear()
        self._commands.clear()
        return step

    def state_digest(self) -> str:
        """A short digest of what the kernel has built up (trading state, positions, orders, the market data
        it trades on, the pre-trade engine, the breakers, the strategies' own state and random generators)
        and where it stands (the last input's sequence number, the run), to show that two kernels fed the
        same journal (say, a restarted daemon's and a replay's, or a snapshot's and replay's at the
        snapshot's seq) agree on everything that decides what they do next."""
        positions = [
            (p.symbol, p.quantity, p.cost, p.realized_pnl, p.commissions, p.cash)
            for _, p in sorted(self.portfolio.positions.items())
        ]
        orders = [(o.order_id, o.status.value, o.filled_qty, o.quantity, o.price, o.uncertain)
                  for o in self.orders.by_id.values()]
        cancels = sorted(self.cancels_pending), sorted(self.replaces_pending)
        counts = [self.orders.count, self.orders.denied]
        place = [self.seq, self.run.run_id if self.run is not None else None, self.now_ns]
        market = sorted(self.market.items())
        # what else decides: the gate's engine, the breakers, each strategy's own state and random generator
        strategies = [[s.strategy_id, s.digest_state(), list(self.contexts[s.strategy_id].rng.getstate()[1]),
                       self.contexts[s.strategy_id].digest_state()] for s in self.strategies]
        deciding = [self.gate.digest_state(), self.safeguards.digest_state(), strategies, sorted(self.paused),
                    self.repeats.digest_state()]
        state = [self.trading.digest_state(), positions, orders, self.portfolio.max_drawdown, cancels, counts, place,
                 market, deciding]
        return hashlib.sha256(msgspec.msgpack.encode(state)).hexdigest()[:16]

    def set_paused(self, strategy_id: str, paused: bool) -> None:
        """Pause or resume a strategy: a paused one is not called for market data or timers."""
        (self.paused.add if paused else self.paused.discard)(strategy_id)
        self.running = [s for s in self.strategies if s.strategy_id not in self.paused]
        self._quote_handlers = [(s.on_quote, self.contexts[s.strategy_id]) for s in self.running]

    def follow_limits(self) -> None:
        """What the quote path must do depends on which limits are on; decided here, once per change."""
        limits = self.gate.limits
        self.limits_version += 1  # what a strategy's memory of a denial depended on (core/context.py)
        self.portfolio.set_track_gross(limits.max_gross_exposure is not None or limits.credit_limit is not None)
        self.safeguards.follow_limits()
        self.repeats.window_ns = limits.repeated_denial_window_ms * 1_000_000  # open windows keep their end
        if self.gate.exposure_on:  # the marks the account's exposure is valued at, from now on kept current
            for symbol, data in self.market.items():
                self.gate.on_reference(symbol, reference_price(data, 0)[0])

    @property
    def state(self) -> TradingState:
        return self.trading.state

    def price_band(self, symbol: str) -> tuple[int, int] | None:
        """The instrument's price band now (lower, upper; nanos), if its breaker keeps one."""
        return self.gate.bands.get(symbol)

    def kelly_quantity(self, symbol: str, win_prob: float, payoff: float) -> int | None:
        """The largest quantity the gate's Kelly check allows for this edge (core/effects.py)."""
        return self.gate.kelly_quantity(symbol, win_prob, payoff, self)

    # --- what the kernel's parts may do (core/effects.py) ------------------------------------------

    def emit(self, event: Derived) -> None:
        """Record a derived event of the input being handled."""
        self._derived.append(event)

    def request(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> None:
        """Ask for an order command: it passes the gate once the input's handler returns."""
        self.requests.append(cmd)

    def next_order_id(self, strategy_id: str) -> str:
        self._order_counter += 1
        return f"{strategy_id}-{self.seq}-{self._order_counter}"

    # --- market data -----------------------------------------------------------------------------

    def _on_quote(self, q: QuoteTick) -> None:
        bid, ask, symbol = q.bid, q.ask, q.symbol
        if bid >= ask or bid <= 0 or ask > _TAGGED and ask > PRICE_MAX:  # PRICE_MAX is beyond _TAGGED: after it
            reason = "crossed quote" if bid > ask else ("locked quote" if bid == ask else "bad price")
            self._derived.append(
                MarketDataFlagged(ts_event=q.ts_event, ts_init=q.ts_init, symbol=symbol, reason=reason)
            )
            return
        self.market[symbol] = q
        self.portfolio.mark(symbol, (bid + ask) // 2)
        if self.gate.exposure_on:
            self.gate.on_reference(symbol, (bid + ask) // 2)
        if self.safeguards.active:
            self.safeguards.on_mark(symbol, (bid + ask) / 2e9, q)
        for on_quote, ctx in self._quote_handlers:
            on_quote(q, ctx)

    def _on_trade(self, trade: TradeTick) -> None:
        if not 0 < trade.price <= PRICE_MAX:
            self._flag_price(trade, trade.price)
            return
        self.market[trade.symbol] = trade
        if self.gate.exposure_on:
            self.gate.on_reference(trade.symbol, trade.price)
        for s in self.running:
            s.on_trade(trade, self.contexts[s.strategy_id])

    def _on_timer(self, timer: TimerFired) -> None:
        for s in self.running:
            s.on_timer(timer, self.contexts[s.strategy_id])

    def _on_bar(self, bar: Bar) -> None:
        # a bar of one side is still the best mark there is (a bid bar is what a long could sell at)
        if not 0 < bar.close <= PRICE_MAX:
            self._flag_price(bar, bar.close)
            return
        self.market[bar.symbol] = bar
        self.portfolio.mark(bar.symbol, bar.close)
        if self.gate.exposure_on:
            self.gate.on_reference(bar.symbol, bar.close)
        if self.safeguards.active:
            self.safeguards.on_mark(bar.symbol, bar.close / 1e9, bar)
        for s in self.running:
            s.on_bar(bar, self.contexts[s.strategy_id])

    # --- model scores (messages/scores.py) -----------------------------------------------------------

    def _on_score(self, score: ModelScored) -> None:
        """A model's forecast reaches the strategies, once checked: one that cannot be used as it stands is
        refused and tightens trading as a model's failure does (nothing trades on it)."""
        problem = score_problem(score, self.instruments)
        if problem:
            self._derived.append(ScoreRefused(ts_event=score.ts_event, ts_init=score.ts_init,
                                              model_id=score.model_id, symbol=score.symbol, reason=problem))
            self.change_trading(Cause.BREAKER, score, f"model {score.model_id}: score refused: {problem}",
                                TradingState.REDUCING)
            return
        for s in self.running:
            s.on_score(score, self.contexts[s.strategy_id])

    def _on_action(self, act: PolicyActed) -> None:
        """A trading agent's decision reaches the strategies (the agent strategy acts on it), once checked as
        a score is: one that cannot be used is refused and tightens trading (nothing trades on it)."""
        problem = action_problem(act, self.instruments)
        if problem:
            self._derived.append(ScoreRefused(ts_event=act.ts_event, ts_init=act.ts_init, model_id=act.policy_id,
                                              symbol=act.symbol, reason=problem))
            self.change_trading(Cause.BREAKER, act, f"policy {act.policy_id}: action refused: {problem}",
                                TradingState.REDUCING)
            return
        for s in self.running:
            s.on_action(act, self.contexts[s.strategy_id])

    def _on_model_failed(self, msg: ModelFailed) -> None:
        """A model that cannot answer: no new exposure until an operator resumes (runtime/scoring.py reloads
        the models the operator's resume finds failed)."""
        on = f" scoring {msg.symbol}" if msg.symbol else ""
        self.change_trading(Cause.BREAKER, msg, f"model {msg.model_id} failed{on} ({msg.what}): {msg.reason}",
                            TradingState.REDUCING)

    def _flag_price(self, data: Bar | TradeTick, price: int) -> None:
        self._derived.append(MarketDataFlagged(ts_event=data.ts_event, ts_init=data.ts_init, symbol=data.symbol,
                                               reason=f"bad price {price}"))

    # --- orders ----------------------------------------------------------------------------------

    def _on_order_event(self, event: OrderEvent, order: Order) -> None:
        """An event of `order` (a venue's report, the gate's verdict): the order, the gate's bookkeeping
        and the strategy that owns the order follow it."""
        was_open, leaves, price = order.is_open, order.leaves_qty, order.price
        self.orders.apply_to(order, event)
        if not order.is_open or type(event) is OrderCancelRejected and not event.replace:  # moot, or refused
            self.cancels_pending.pop(order.order_id, None)
        if not order.is_open or type(event) is OrderReplaced or type(event) is OrderCancelRejected and event.replace:
            self.replaces_pending.pop(order.order_id, None)
        if was_open or order.is_open:
            self.gate.on_order(order, was_open, leaves, price)
        for strategy, ctx in self._by_strategy.get(order.strategy_id, ()):
            strategy.on_order_event(event, order, ctx)

    def _admit(self, report: OrderEvent, order: Order | None) -> bool:
        """Whether the order's lifecycle allows this report of the venue's; if not, the report is recorded as
        refused. A refused fill also tightens trading (`refused_fill_action`: a halt, the kill switch, unless
        configured to reduce): money may have moved at the venue that the positions cannot show."""
        reason = refusal(order, report)
        kind = type(report)
        if not reason and (kind is _FILL or kind is _PARTIAL_FILL):
            reason = self._fill_value_problem(cast(Order, order), cast(OrderFilled, report))
        elif not reason and kind is _REPLACED:
            reason = self._replace_problem(cast(Order, order), cast(OrderReplaced, report))
        if not reason:
            return True
        self.emit(OrderReportRefused(ts_event=report.ts_event, ts_init=report.ts_init, order_id=report.order_id,
                                     symbol=report.symbol, report=kind.__name__, reason=reason))
        if kind is _FILL or kind is _PARTIAL_FILL:
            fill = cast(OrderFilled, report)
            action = TradingState.REDUCING if self.gate.limits.refused_fill_action == "reduce" else TradingState.HALTED
            cause = f"fill {fill.trade_id} of order {fill.order_id} refused: {reason}"
            self.change_trading(Cause.BREAKER, fill, cause, action)
        elif kind is _REPLACED and order is not None:
            cause = f"order {order.order_id} replaced unasked: {reason}"
            self.change_trading(Cause.BREAKER, cast(OrderReplaced, report), cause, TradingState.HALTED)
        return False

    def _fill_value_problem(self, order: Order, fill: OrderFilled) -> str:
        """Why a fill the order's lifecycle allows cannot be booked as it stands: a quantity off the lot, a
        price off the execution tick or the collar around the reference (an order without a limit, which the
        collar bounds), or a position beyond what the engine holds ("" if none)."""
        symbol, qty, price = order.symbol, fill.last_qty, fill.last_price  # the fill's side is the order's (refusal)
        inst = self.instruments[symbol]
        if qty % inst.lot_size:
            return f"fill of {format_fixed(qty)} is not a multiple of the lot {format_fixed(inst.lot_size)}"
        tick = inst.execution_tick or inst.tick_size
        if price % tick:
            return (f"fill at {format_fixed(price)} is not a multiple of the tick {format_fixed(tick)}"
                    f" (instruments.{symbol}.execution_tick, where executions are finer)")
        if order.order_type is not _LIMIT:
            beyond = self.gate.beyond_collar(symbol, price, reference_price(self.market.get(symbol), 0)[0])
            if beyond:
                return f"fill at {format_fixed(price)}: {beyond}"
        pos = self.portfolio.positions.get(symbol)
        held = pos.quantity if pos is not None else 0
        after = held + qty if order.side is _BUY else held - qty
        # a tagged int first: compiled, a comparison with POSITION_MAX (2**62, beyond one) is Python's
        if not -_TAGGED <= after <= _TAGGED and not -POSITION_MAX <= after <= POSITION_MAX:
            return f"the position would be {format_fixed(after)}, beyond what foxhunt holds"
        return ""

    def _replace_problem(self, order: Order, replaced: OrderReplaced) -> str:
        """Why a venue's replace cannot be the order's new terms: no replace of it was asked for, or its
        quantity is below what has filled or above what was asked ("" if none)."""
        asked = self.replaces_pending.get(order.order_id)
        if asked is None:
            return "no replace of the order was asked for"
        most = max(order.quantity, asked.quantity if asked.quantity is not None else order.quantity)
        if not order.filled_qty <= replaced.quantity <= most:
            return (f"quantity {format_fixed(replaced.quantity)} is outside {format_fixed(order.filled_qty)} (filled)"
                    f" to {format_fixed(most)} (asked)")
        return ""

    def _on_report(self, report: OrderEvent) -> None:
        """A venue's report of one of our orders, other than a fill."""
        order = self.orders.by_id.get(report.order_id)
        if self._admit(report, order):
            self._on_order_event(report, cast(Order, order))

    def _on_fill(self, report: OrderPartiallyFilled | OrderFilled) -> None:
        """A venue's fill, booked once: a fill the order has booked already (a repeat, a resend after a
        restart) is recorded as a duplicate and changes nothing. The kernel's own state says so, rebuilt from
        the journal, whatever the venue adapter remembers (core/orders.py, `duplicate`)."""
        order = self.orders.by_id.get(report.order_id)
        fill = report
        if order is not None:
            why = duplicate(order, report)
            if why:
                self.emit(DuplicateFillIgnored(ts_event=report.ts_event, ts_init=report.ts_init,
                                               order_id=report.order_id, symbol=report.symbol,
                                               trade_id=report.trade_id, reason=why))
                return
            fill = booked(order, report)
        if not self._admit(fill, order):
            return
        order = cast(Order, order)  # admitted: the order's, of its symbol and side (refusal)
        symbol = order.symbol
        inst = self.instruments[symbol]
        pos = self.portfolio.open_position(symbol, inst.currency, inst.multiplier)
        self.portfolio.apply_fill(pos, order.side, fill.last_qty, fill.last_price, fill.commission)
        self.gate.on_position(symbol, pos.quantity)
        self._position_changed(pos, fill)
        self._on_order_event(fill, order)
        if self.safeguards.fills:
            self.safeguards.on_fill(fill, self.now_ns)

    def _on_commission(self, msg: CommissionReported) -> None:
        """An execution's commission reported after its fill: what it adds to the commission booked with the
        fill is booked now, once. One for an execution the order has not booked is refused (it changes
        nothing: the fill, when it comes, carries its own)."""
        order = self.orders.by_id.get(msg.order_id)
        booked = order.executions.get(msg.trade_id) if order is not None else None
        if order is None or booked is None or booked[2] == msg.commission:
            why = ("no such order" if order is None else f"execution {msg.trade_id} is not booked" if booked is None
                   else f"the commission of execution {msg.trade_id} is booked already")
            self.emit(OrderReportRefused(ts_event=msg.ts_event, ts_init=msg.ts_init, order_id=msg.order_id,
                                         symbol=msg.symbol, report="CommissionReported", reason=why))
            return
        cum, qty, charged = booked
        order.executions[msg.trade_id] = (cum, qty, msg.commission)
        pos = self.portfolio.positions[order.symbol]
        self.portfolio.apply_commission(pos, msg.commission - charged)
        self._position_changed(pos, msg)

    def _position_changed(self, pos: Position, cause: Input) -> None:
        self._derived.append(PositionChanged(
            ts_event=cause.ts_event, ts_init=cause.ts_init, symbol=pos.symbol, quantity=pos.quantity,
            avg_price=pos.avg_price, realized_pnl=pos.realized_pnl, commissions=pos.commissions, cash=pos.cash,
        ))

    def _on_venue_message_rejected(self, msg: VenueMessageRejected) -> None:
        """A venue's message that could not be used: where it was an execution report, trading tightens as
        the venue's policy asks (an execution may have vanished; an operator must reconcile)."""
        if msg.tighten is not None:
            self.change_trading(Cause.BREAKER, msg, f"venue {msg.venue}: {msg.msg_type} message unusable: {msg.reason}",
                                msg.tighten)

    def _on_venue_disconnected(self, msg: VenueDisconnected) -> None:
        """Nothing new goes to a venue that is down, and what it has working becomes uncertain (the kernel
        trades through one venue: every working order is there)."""
        self.venues_down.add(msg.venue)
        uncertain = [order for order in self.orders.open.values() if not order.uncertain]
        for order in uncertain:
            order.uncertain = True
        if uncertain:
            self.emit(OrdersUncertain(ts_event=msg.ts_event, ts_init=msg.ts_init, venue=msg.venue,
                                      order_ids=[o.order_id for o in uncertain],
                                      reason=f"venue {msg.venue} down: {msg.reason}"))

    def _on_venue_connected(self, msg: VenueConnected) -> None:
        """The venue is back and has reconciled its orders: what it reported meanwhile is applied, and the
        rest are working as believed. The cancels held while it was down, or sent and never answered, are
        asked for again; with `cancel_working` every other working order's too."""
        self.venues_down.discard(msg.venue)
        for order in self.orders.open.values():
            order.uncertain = False
        pending, self.cancels_pending = self.cancels_pending, {}
        for order_id, reason in pending.items():
            again = f"{reason.split(AGAIN)[0]}{AGAIN}{msg.venue} is back)"  # once, however many times
            self.request_cancel(self.orders.get(order_id), msg, again)
        if msg.cancel_working:  # the kernel trades through one venue: its working orders are all there
            for order in list(self.orders.open.values()):
                if order.order_id not in pending:
                    self.request_cancel(order, msg, f"cancel_on_reconnect: venue {msg.venue} reconnected")

    def request_cancel(self, order: Order, cause_msg: Input, reason: str) -> None:
        """Ask for a working order's cancel, stamped with the input that caused it; it passes the gate."""
        self.requests.append(CancelOrder(ts_event=cause_msg.ts_event, ts_init=cause_msg.ts_init,
                                         order_id=order.order_id, symbol=order.symbol, reason=reason))

    def _drain_requests(self) -> None:
        for _ in range(MAX_ROUNDS):
            requests, self.requests = self.requests, []
            for cmd in requests:
                problem = malformed(cmd)
                if problem:  # recorded as it can be journaled, and denied with what was wrong
                    cmd = _sanitized(cmd)
                self._derived.append(cmd)
                kind = type(cmd)
                if problem:
                    self._deny_malformed(cmd, problem)
                    continue
                if kind is _SUBMIT:
                    self._submit(cast(SubmitOrder, cmd))
                elif kind is _CANCEL:
                    self._cancel(cast(CancelOrder, cmd))
                elif kind is _REPLACE:
                    self._replace(cast(ReplaceOrder, cmd))
                else:
                    raise KernelError(f"a strategy requested {kind.__name__}, which is not an order command")
            if not self.requests:
                return
        raise KernelError(f"input {self.seq} still produced requests after {MAX_ROUNDS} rounds")

    def _deny_malformed(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder, problem: str) -> None:
        if type(cmd) is SubmitOrder and cmd.order_id not in self.orders.by_id:
            self.orders.add(Order.from_command(cast(SubmitOrder, cmd)))
        self._verdict(cmd, ("MALFORMED_REQUEST", problem))

    def _submit(self, cmd: SubmitOrder) -> None:
        order = Order.from_command(cmd)
        self.orders.add(order)
        denial: tuple[str, str] | None
        if self.venues_down:
            denial = ("VENUE_DISCONNECTED", ",".join(sorted(self.venues_down)))
        else:
            denial = self.gate.check_submit(cmd, self, order)
        self._verdict(cmd, denial)

    def _cancel(self, cmd: CancelOrder) -> None:
        order = self.orders.by_id.get(cmd.order_id)
        if order is None:
            self._verdict(cmd, ("UNKNOWN_ORDER", f"order_id={cmd.order_id}"))
            return
        if not order.is_open:
            self._verdict(cmd, ("ORDER_NOT_OPEN", f"status={order.status.value}"))
            return
        self.cancels_pending.setdefault(order.order_id, cmd.reason)
        if self.venues_down:  # held: asked for again once the venue is back (_on_venue_connected)
            down = ",".join(sorted(self.venues_down))
            self._verdict(cmd, ("VENUE_DISCONNECTED", f"{down}; held until it is back"))
        else:
            self.gate.note_cancel(self.now_ns)
            self._commands.append(cmd)

    def _replace(self, cmd: ReplaceOrder) -> None:
        order = self.orders.by_id.get(cmd.order_id)
        if order is None:
            self._verdict(cmd, ("UNKNOWN_ORDER", f"order_id={cmd.order_id}"))
            return
        denial = ("ORDER_NOT_OPEN", f"status={order.status.value}") if not order.is_open else None
        if denial is None and self.venues_down:  # not held: its terms may be stale by the time it is back
            denial = ("VENUE_DISCONNECTED", ",".join(sorted(self.venues_down)))
        if denial is None:
            denial = self.gate.check_replace(cmd, order, self)
        if denial is not None:
            self._verdict(cmd, denial)
        else:
            self.replaces_pending[order.order_id] = cmd
            self._commands.append(cmd)

    def _verdict(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder, denial: tuple[str, str] | None) -> None:
        order = self.orders.by_id.get(cmd.order_id)
        if denial is None:
            event: OrderSubmitted | OrderDenied = OrderSubmitted(
                ts_event=cmd.ts_event, ts_init=cmd.ts_init, order_id=cmd.order_id, symbol=cmd.symbol
            )
            self._commands.append(cmd)
            self._derived.append(event)
        else:
            event = OrderDenied(ts_event=cmd.ts_event, ts_init=cmd.ts_init, order_id=cmd.order_id,
                                symbol=cmd.symbol, reason=denial[0], detail=denial[1])
            kind = type(cmd)
            submit = cast(SubmitOrder, cmd) if kind is _SUBMIT else None
            if submit is not None:
                key = (submit.strategy_id, cmd.symbol, "SubmitOrder", submit.side.value, denial[0])
            else:
                key = (order.strategy_id if order is not None else "", cmd.symbol, kind.__name__,
                       order.side.value if order is not None else "", denial[0])
            if not self.repeats.held(key, cmd.order_id, self.now_ns):
                self._derived.append(event)
                self._repeats_due = self.repeats.due_ns
            elif self._derived and self._derived[-1] is cmd:  # the request, recorded as it came: held back too
                self._derived.pop()
            else:
                raise KernelError(f"the denied {kind.__name__} {cmd.order_id} is not the last event derived")
            if submit is not None:
                ctx = self.contexts.get(submit.strategy_id)
                if ctx is not None:  # its strategy remembers what it asked in vain (core/context.py)
                    ctx.remember_denial(submit)
        if order is not None:  # a cancel or replace naming no order is denied, and that is all
            self._on_order_event(event, order)

    def _close_repeats(self, msg: Input, now_ns: int) -> None:
        """Summarise the windows of held-back denials that end by `now_ns` (NEVER: all), as events of `msg`."""
        for (strategy_id, symbol, request, side, reason), w in self.repeats.close(now_ns):
            self._derived.append(DenialsRepeated(
                ts_event=msg.ts_event, ts_init=msg.ts_init, strategy_id=strategy_id, symbol=symbol, request=request,
                side=side, reason=reason, repeats=w.repeats, first_order_id=w.first_order_id,
                last_order_id=w.last_order_id, since_ns=w.since_ns))
        self._repeats_due = self.repeats.due_ns

    # --- system ----------------------------------------------------------------------------------

    def _on_run_started(self, msg: RunStarted) -> None:
        self._close_repeats(msg, NEVER)  # a run that was killed left its windows open
        self.run = msg
        self.seed = msg.seed
        for s in self.strategies:
            ctx = self.contexts[s.strategy_id]
            ctx.seed(msg.seed)
            s.on_start(ctx)

    def _on_run_stopped(self, msg: RunStopped) -> None:
        self._close_repeats(msg, NEVER)

    def _on_journal_degraded(self, msg: JournalDegraded) -> None:
        self.change_trading(Cause.JOURNAL_DOWN, msg, f"journal fail-stop: {msg.reason}")

    def _on_journal_recovered(self, msg: JournalRecovered) -> None:
        # Only the journal's own halt is lifted; a halt an operator ordered meanwhile stays.
        self.change_trading(Cause.JOURNAL_BACK, msg, f"journal recovered after {msg.outage_ns // 1_000_000} ms")

    def change_trading(self, cause: Cause, msg: Input, text: str, to: TradingState | None = None,
                       cancel_reason: str | None = None) -> None:
        """Apply a cause to the trading state (core/trading_state.py's table): a move is journaled with
        `text`, and where the cause cancels working orders (the kill switch), each is asked to be."""
        previous, cancel = self.trading.apply(cause, to)
        if previous is not None:
            change = TradingStateChanged(ts_event=msg.ts_event, ts_init=msg.ts_init, state=self.trading.state,
                                         previous=previous, cause=text)
            self._derived.append(change)
            for strategy in self.strategies:  # paused or not: what they may ask for has changed
                strategy.on_trading_state(change, self.contexts[strategy.strategy_id])
        if cancel:
            reason = cancel_reason if cancel_reason is not None else f"kill switch: {text}"
            for order in list(self.orders.open.values()):
                self.request_cancel(order, msg, reason)


# What a request must hold to be journaled and checked, field by field: (field, the types it may hold, what
# a request that holds something else is recorded with); an int must also fit in int64. A strategy builds
# its requests itself, so the kernel checks them: a float, NaN or out-of-range quantity, a price of the wrong
# type, is a denial that names it (MALFORMED_REQUEST), never an exception out of the kernel nor a journal
# row that cannot be read back.
_NONE = type(None)
_REQUEST_FIELDS: dict[type, tuple[tuple[str, tuple[type, ...], object], ...]] = {
    SubmitOrder: (
        ("order_id", (str,), "?"), ("strategy_id", (str,), "?"), ("symbol", (str,), "?"), ("side", (Side,), Side.BUY),
        ("order_type", (OrderType,), OrderType.MARKET), ("quantity", (int,), 0), ("price", (int, _NONE), None),
        ("trigger_price", (int, _NONE), None), ("time_in_force", (TimeInForce,), TimeInForce.GTC),
        ("reduce_only", (bool,), False), ("edge_win_prob", (float, _NONE), None),
        ("edge_payoff", (float, _NONE), None),
    ),
    CancelOrder: (("order_id", (str,), "?"), ("symbol", (str,), "?"), ("reason", (str,), "")),
    ReplaceOrder: (
        ("order_id", (str,), "?"), ("symbol", (str,), "?"), ("quantity", (int, _NONE), None),
        ("price", (int, _NONE), None), ("trigger_price", (int, _NONE), None),
    ),
}
# the same, aligned with each request's fields in order (msgspec.structs.astuple reads them in one call):
# the check runs for every order a strategy asks for
_ALIGNED: Final[dict[type, tuple[tuple[type, ...], ...]]] = {
    cls: tuple(next((kinds for name, kinds, _ in fields if name == field), (int,))
               for field in cast(type[msgspec.Struct], cls).__struct_fields__)
    for cls, fields in _REQUEST_FIELDS.items()
}
_ASTUPLE: Final = msgspec.structs.astuple  # a C static, where compiled (`msgspec.structs.astuple`: two lookups)


def _fits(value: object, kinds: tuple[type, ...]) -> bool:
    kind = type(value)
    for k in kinds:  # by identity, where `in` would compare each with ==
        if k is kind:
            break
    else:
        return False
    # a tagged int's bound first: compiled, a comparison with INT64_MAX, beyond a tagged int, is Python's
    return kind is not int or -_TAGGED <= cast(int, value) <= _TAGGED or -INT64_MAX <= cast(int, value) <= INT64_MAX


def malformed(cmd: object) -> str:
    """What of a request cannot be journaled or checked as it stands ("" if nothing)."""
    aligned = _ALIGNED.get(type(cmd))
    if aligned is None:
        return ""
    values = _ASTUPLE(cast(msgspec.Struct, cmd))
    for i in range(len(aligned)):
        if not _fits(values[i], aligned[i]):
            break
    else:
        return ""
    bad = [f"{name}={getattr(cmd, name)!r}" for name, k, _ in _REQUEST_FIELDS[type(cmd)]
           if not _fits(getattr(cmd, name), k)]
    return f"not a valid {type(cmd).__name__}: " + ", ".join(bad)


def _sanitized(cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> SubmitOrder | CancelOrder | ReplaceOrder:
    """The request with each field it cannot hold replaced by a neutral value (what was there is in the
    denial's detail)."""
    fixes = {name: stand_in for name, kinds, stand_in in _REQUEST_FIELDS[type(cmd)]
             if not _fits(getattr(cmd, name), kinds)}
    return msgspec.structs.replace(cmd, **fixes)


def score_problem(score: ModelScored, instruments: dict[str, Instrument]) -> str:
    """What makes a ModelScored unusable as it stands ("" if nothing): an unknown symbol, horizons that are
    not increasing and positive, quantiles not increasing inside (0, 1), outputs of another shape than
    horizons times quantiles, or an output that is not a finite number."""
    if score.symbol not in instruments:
        return f"{score.symbol!r} is not a configured instrument"
    h, q, out = score.horizons, score.quantiles, score.outputs
    if not h or any(type(x) is not int or x < 1 for x in h) or any(a >= b for a, b in itertools.pairwise(h)):
        return f"horizons {h} are not increasing positive integers"
    if not q or any(type(x) is not float or not 0.0 < x < 1.0 for x in q) or any(a >= b for a, b in itertools.pairwise(q)):
        return f"quantiles {q} are not increasing inside (0, 1)"
    if len(out) != len(h) * len(q):
        return f"{len(out)} outputs for {len(h)} horizons of {len(q)} quantiles"
    for i, x in enumerate(out):
        if type(x) is not float or not math.isfinite(x):
            return f"output {i} is {x!r}, not a finite number"
    return ""


def action_problem(act: PolicyActed, instruments: dict[str, Instrument]) -> str:
    """What makes a PolicyActed unusable ("" if nothing): an unknown symbol, or a fraction that is not a
    finite number in [-1, 1]."""
    if act.symbol not in instruments:
        return f"{act.symbol!r} is not a configured instrument"
    if type(act.fraction) is not float or not -1.0 <= act.fraction <= 1.0:
        return f"fraction {act.fraction!r} is not a number in [-1, 1]"
    return ""


def _ignore(msg: Input) -> None:
    """Inputs that are journaled for the record and change nothing in the kernel."""


_NOTHING: Final = Step((), ())  # shared, immutable: most quotes derive nothing
