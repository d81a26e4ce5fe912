"""The pre-trade gate under hostile inputs (issue 32): values chosen to wrap int64, to raise out of the
kernel, to disarm a limit, to slip past the account's limits in one input, or to corrupt the books from a
venue's report. Each case below failed once; the stateful fuzz test at the end drives arbitrary inputs
and holds the kernel to its two promises: `handle` never raises, and the engine's arrays always equal the
portfolio and the order book."""

from __future__ import annotations

import math
from decimal import Decimal

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from foxhunt.core.kernel import Kernel
from foxhunt.core.orders import OrderStatus
from foxhunt.core.risk import checks as rc
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategy import Strategy
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import QuoteTick
from foxhunt.messages.orders import (
    OrderAccepted,
    OrderCanceled,
    OrderDenied,
    OrderFilled,
    OrderPartiallyFilled,
    OrderReplaced,
    OrderReportRefused,
    OrderType,
    ReplaceOrder,
    Side,
)
from foxhunt.messages.system import AdminCommand, CommandRejected, TradingState
from tests.fakes import INSTRUMENTS, quote

UNIT = 10**9


class Asking(Strategy):
    """Asks, on the next quote, for whatever the test put in `asks`: keyword arguments of ctx.submit."""

    strategy_id = "s"

    def __init__(self) -> None:
        self.asks: list[dict] = []
        self.ids: list[str] = []

    def on_quote(self, quote, ctx) -> None:
        asks, self.asks = self.asks, []
        for ask in asks:
            self.ids.append(ctx.submit(**ask))


def make(instruments=INSTRUMENTS, **limits) -> tuple[Kernel, Asking]:
    """A kernel that journals every denial (these tests read each one; tests/unit/test_denial_storm.py has
    the window that holds repeats back)."""
    strategy = Asking()
    limits.setdefault("repeated_denial_window_ms", 0)
    k = Kernel(instruments, [strategy], PreTradeGate(RiskLimits(**limits), instruments))
    k.handle(1, quote(1_000, "1.10000", "1.10002"))  # reference mid 1.10001
    return k, strategy


class Driver:
    """Feeds a kernel its inputs with rising sequence numbers and collects what each derived."""

    def __init__(self, k: Kernel, strategy: Asking) -> None:
        self.k, self.strategy, self.seq, self.ts = k, strategy, 1, 1_000

    def handle(self, msg):
        self.seq += 1
        return self.k.handle(self.seq, msg)

    def ask(self, *asks: dict) -> list:
        """Ask for orders on a quote at the reference; the verdicts, as (reason or "OK", detail)."""
        self.strategy.asks.extend(asks)
        step = self.handle(quote(self.ts, "1.10000", "1.10002"))
        verdicts = [e for e in step.derived if type(e).__name__ in ("OrderSubmitted", "OrderDenied")]
        return [(e.reason, e.detail) if isinstance(e, OrderDenied) else ("OK", "") for e in verdicts]

    def admin(self, *args: str):
        return self.handle(AdminCommand(ts_event=self.ts, ts_init=self.ts, command=args[0], args=list(args[1:]),
                                        operator_uid=1, operator="alice", reason="test"))

    def accept(self, order_id: str):
        order = self.k.orders.get(order_id)
        return self.handle(OrderAccepted(ts_event=self.ts, ts_init=self.ts, order_id=order_id, symbol=order.symbol,
                                         venue_order_id=f"v-{order_id}"))

    def fill(self, order_id: str, qty: int, price: int, final: bool = False, trade: str = ""):
        order = self.k.orders.get(order_id)
        kind = OrderFilled if final else OrderPartiallyFilled
        return self.handle(kind(ts_event=self.ts, ts_init=self.ts, order_id=order_id, symbol=order.symbol,
                                side=order.side, trade_id=trade or f"t{self.seq}", last_qty=qty, last_price=price,
                                leaves_qty=0 if final else max(order.leaves_qty - qty, 0)))


def buy(qty: str, price: str | None = None, **extra) -> dict:
    kind = OrderType.LIMIT if price else OrderType.MARKET
    return dict(symbol="EURUSD", side=Side.BUY, quantity=d(qty), order_type=kind, price=d(price) if price else None,
                **extra)


def sell(qty: str, price: str | None = None, **extra) -> dict:
    return {**buy(qty, price, **extra), "side": Side.SELL}


# --- 1. no wrap-around -----------------------------------------------------------------------------


def test_a_limit_price_that_would_wrap_the_collar_product_is_denied():
    driver = Driver(*make())  # the default collar: 500 bps
    assert driver.ask(buy("1000", "1000000")) == [("PRICE_COLLAR_PCT", "price_away=999998.89999 reference=1.10001")]


def test_a_notional_that_would_wrap_is_denied():
    driver = Driver(*make(max_order_qty=None, collar_bps=None, max_order_notional=Decimal(5_000_000)))
    ((reason, _),) = driver.ask(buy("1000000000", "100000000"))
    assert reason == "MAX_ORDER_NOTIONAL"


def test_no_order_is_larger_than_a_billion_units_and_working_sums_stay_exact():
    driver = Driver(*make(max_order_qty=None, collar_bps=None, max_position_long=Decimal(1_000_000_000)))
    assert driver.ask(buy("5000000000")) == [("MAX_ORDER_QTY", "qty=5000000000 limit=1000000000")]
    assert driver.ask(buy("1000000000")) == [("OK", "")]
    assert driver.ask(buy("1000000000")) == [("MAX_POSITION_LONG", "worst_case=2000000000 limit=1000000000")]


# --- 2. nothing raises out of the kernel -------------------------------------------------------------


def test_a_strategys_malformed_quantity_is_denied_by_name_and_leaves_nothing_behind():
    k, strategy = make()
    driver = Driver(k, strategy)
    verdicts = driver.ask({**buy("1000"), "quantity": 2**63}, {**buy("1000"), "quantity": 1000.0},
                          {**buy("1000"), "quantity": math.nan}, {**buy("1000", "1.1"), "price": 1.1})
    assert [reason for reason, _ in verdicts] == ["MALFORMED_REQUEST"] * 4
    assert verdicts[0][1] == "not a valid SubmitOrder: quantity=9223372036854775808"
    assert verdicts[3][1] == "not a valid SubmitOrder: price=1.1"
    assert driver.ask() == []  # the next quote derives nothing of them
    assert all(k.orders.get(i).status is OrderStatus.DENIED for i in strategy.ids)


def test_a_cancel_of_an_unknown_order_is_denied_not_raised():
    class Canceling(Strategy):
        strategy_id = "c"

        def on_quote(self, quote, ctx) -> None:
            ctx.cancel("no-such-order")

    k = Kernel(INSTRUMENTS, [Canceling()], PreTradeGate(RiskLimits(), INSTRUMENTS))
    step = k.handle(1, quote(1_000, "1.10000", "1.10002"))
    (denied,) = [e for e in step.derived if isinstance(e, OrderDenied)]
    assert (denied.reason, denied.detail) == ("UNKNOWN_ORDER", "order_id=no-such-order")


def test_a_fill_that_would_take_the_position_past_what_the_engine_holds_is_refused():
    driver = Driver(*make(max_order_qty=None, collar_bps=None))
    for _ in range(4):
        driver.ask(buy("1000000000"))
        order_id = driver.strategy.ids[-1]
        driver.accept(order_id)
        driver.fill(order_id, 10**18, d("1.1"), final=True)
    assert driver.k.portfolio.positions["EURUSD"].quantity == 4 * 10**18
    driver.ask(buy("1000000000"))
    driver.accept(driver.strategy.ids[-1])
    step = driver.fill(driver.strategy.ids[-1], 10**18, d("1.1"), final=True)
    (refused,) = [e for e in step.derived if isinstance(e, OrderReportRefused)]
    assert "beyond what foxhunt holds" in refused.reason
    assert driver.k.state is TradingState.HALTED
    assert driver.k.gate.rows["EURUSD"][rc.S_POSITION] == 4 * 10**18


# --- 3. limits set at run time -------------------------------------------------------------------------


def test_limit_set_rejects_what_is_not_a_finite_value_in_range_and_keeps_the_gate_armed():
    driver = Driver(*make())
    for name, value in [("max_order_qty", "99999999999"), ("collar_bps", "99999999999999999999"),
                        ("collar_bps", "1e30"), ("max_gross_exposure", "nan"), ("kelly_multiplier", "nan"),
                        ("credit_limit", "nan"), ("credit_limit", "inf"), ("max_order_qty", "-5"),
                        ("collar_ticks", "-1"), ("var_confidence", "nan")]:
        step = driver.admin("limit", "set", name, value)
        (rejected,) = [e for e in step.derived if isinstance(e, CommandRejected)]
        assert rejected.reason.startswith(f"risk limit {name}={value!r}: "), rejected.reason
        assert "must be" in rejected.reason or "Expected `int" in rejected.reason, rejected.reason
    assert driver.k.gate.limits == RiskLimits(repeated_denial_window_ms=0)  # nothing changed
    step = driver.admin("limit", "set", "collar_bps", "100")  # and the next change applies
    assert not [e for e in step.derived if isinstance(e, CommandRejected)]
    assert driver.ask(buy("1000", "1.12000")) == [("PRICE_COLLAR_PCT", "price_away=0.01999 reference=1.10001")]


# --- 4. orders with no or bad prices -------------------------------------------------------------------


def test_an_order_must_carry_the_prices_its_type_needs_and_a_stops_trigger_is_checked():
    driver = Driver(*make())
    assert driver.ask({**buy("1000"), "order_type": OrderType.LIMIT}) == [
        ("INVALID_ORDER_TERMS", "a LIMIT order needs a limit price")]
    assert driver.ask({**buy("1000", "1.1"), "order_type": OrderType.MARKET}) == [
        ("INVALID_ORDER_TERMS", "a MARKET order takes no limit price")]
    assert driver.ask({**buy("1000"), "order_type": OrderType.STOP}) == [
        ("INVALID_ORDER_TERMS", "a STOP order needs a trigger price")]
    stop = {**buy("1000"), "order_type": OrderType.STOP}
    assert driver.ask({**stop, "trigger_price": d("-5")}) == [("INVALID_TICK", "price=-5 tick=0.00001")]
    assert driver.ask({**stop, "trigger_price": d("1.100005")}) == [("INVALID_TICK", "price=1.100005 tick=0.00001")]
    assert driver.ask({**stop, "trigger_price": d("1000")}) == [
        ("PRICE_COLLAR_PCT", "price_away=998.89999 reference=1.10001")]
    assert driver.ask({**stop, "trigger_price": d("1.11")}) == [("OK", "")]


# --- 5. orders in one input add up ---------------------------------------------------------------------


def test_working_orders_count_against_gross_and_net_exposure_within_one_input():
    driver = Driver(*make(max_gross_exposure=Decimal(1_000_000), collar_bps=None))
    verdicts = driver.ask(buy("600000", "1.1"), buy("600000", "1.1"))
    assert verdicts[0] == ("OK", "")
    assert verdicts[1][0] == "MAX_GROSS_EXPOSURE"
    netted = Driver(*make(max_net_exposure=Decimal(1_000_000), collar_bps=None))
    assert [v for v, _ in netted.ask(sell("600000", "1.1"), sell("600000", "1.1"))] == ["OK", "MAX_NET_EXPOSURE"]


def test_market_orders_are_worth_their_collar_bounded_price_against_credit():
    driver = Driver(*make(credit_limit=Decimal(1_100_000)))
    verdicts = driver.ask(buy("500000"), buy("500000"))
    assert verdicts[0] == ("OK", "")
    assert verdicts[1] == ("CREDIT_LIMIT", "value=1155010.50 limit=1100000.00")  # 2 x 500,000 x 1.10001 x 1.05
    assert driver.k.gate.working_value == 500_000 * 1.1550105  # 1.10001 and the 500 bps collar's 0.0550005


def test_working_orders_on_the_reducing_side_count_towards_flat():
    driver = Driver(*make(max_position_short=Decimal(0), collar_bps=None))
    driver.ask(buy("1000000"))
    driver.accept(driver.strategy.ids[-1])
    driver.fill(driver.strategy.ids[-1], d("1000000"), d("1.1"), final=True)
    verdicts = driver.ask(*[sell("1000000") for _ in range(5)])
    assert verdicts[0] == ("OK", "")
    assert verdicts[1:] == [("MAX_POSITION_SHORT", "worst_case=1000000 limit=0")] * 4
    driver.admin("reduce")
    reducing = driver.ask(*[sell("1000000", reduce_only=True) for _ in range(2)])
    assert reducing == [("TRADING_REDUCING", "symbol=EURUSD")] * 2  # the working sell already flattens it


def test_a_flatten_closes_the_position_while_the_working_orders_it_cancels_are_on_their_way_out():
    driver = Driver(*make(collar_bps=None))
    driver.ask(buy("100000"))
    driver.accept(driver.strategy.ids[-1])
    driver.fill(driver.strategy.ids[-1], d("100000"), d("1.1"), final=True)
    resting = working(driver, sell("50000", "1.2"))
    step = driver.admin("flatten")
    assert [type(e).__name__ for e in step.derived] == ["CancelOrder", "SubmitOrder", "OrderSubmitted"]
    assert step.commands[0].order_id == resting and step.commands[1].quantity == d("100000")
    # a strategy's sell meanwhile is not reducing: the working sells (the one being canceled too) cover it
    driver.admin("reduce")
    assert driver.ask(sell("1000", reduce_only=True)) == [("TRADING_REDUCING", "symbol=EURUSD")]


def test_the_var_book_counts_working_orders():
    k, strategy = make(max_var=Decimal(300), var_window=20, var_confidence=0.9, collar_bps=None,
                       max_orders_per_window=None, max_messages_per_second=None)
    driver = Driver(k, strategy)
    mids = 1.1 * np.cumprod(1 + np.random.default_rng(5).normal(0, 0.003, 25))
    for t, mid in enumerate(mids, 1):
        driver.ts = t * 60_000_000_000 + 1
        driver.handle(quote(driver.ts, f"{mid - 0.0001:.5f}", f"{mid + 0.0001:.5f}"))
    verdicts = [reason for reason, _ in driver.ask(*[buy("10000") for _ in range(10)])]
    assert verdicts[0] == "OK"
    assert "MAX_VAR" in verdicts  # ten orders each within the limit do not add up past it
    var_after = k.gate.book_var.check("EURUSD", 0.0)[0]
    assert var_after <= 300


# --- 6. reports checked for value ----------------------------------------------------------------------


def working(driver: Driver, ask: dict) -> str:
    driver.ask(ask)
    order_id = driver.strategy.ids[-1]
    driver.accept(order_id)
    return order_id


def refusal_of(step) -> str:
    (refused,) = [e for e in step.derived if isinstance(e, OrderReportRefused)]
    return refused.reason


def test_fills_are_checked_for_value_against_their_order():
    driver = Driver(*make())
    order_id = working(driver, buy("100000", "1.1"))
    assert refusal_of(driver.fill(order_id, d("1000"), d("5"))) == "fill at 5 beyond the order's limit 1.1"
    assert "not a trade" in refusal_of(driver.fill(order_id, d("1000"), d("-1")))
    assert "not a trade" in refusal_of(driver.fill(order_id, d("-50000"), d("1.1")))
    assert "not a trade" in refusal_of(driver.fill(order_id, 0, d("1.1")))
    assert refusal_of(driver.fill(order_id, d("1500"), d("1.1"))) == "fill of 1500 is not a multiple of the lot 1000"
    market = Driver(*make())
    market_id = working(market, buy("1000"))
    assert refusal_of(market.fill(market_id, d("1000"), d("1.2"))) == (
        "fill at 1.2: 0.09999 from the reference 1.10001, beyond the collar of 500 bps")
    assert not market.k.portfolio.positions


def test_a_fill_off_the_tick_is_refused_unless_the_instruments_executions_are_finer():
    driver = Driver(*make())
    order_id = working(driver, buy("100000", "1.1"))
    assert refusal_of(driver.fill(order_id, d("1000"), d("1.099995"))) == (
        "fill at 1.099995 is not a multiple of the tick 0.00001 (instruments.EURUSD.execution_tick, where"
        " executions are finer)")
    assert driver.k.state is TradingState.HALTED and not driver.k.portfolio.positions
    finer = {"EURUSD": msgspec.structs.replace(INSTRUMENTS["EURUSD"], execution_tick=d("0.000005"))}
    driver = Driver(*make(finer))
    order_id = working(driver, buy("100000", "1.1"))
    driver.fill(order_id, d("1000"), d("1.099995"))  # a price-improved execution, on the finer grid
    assert driver.k.portfolio.positions["EURUSD"].quantity == d("1000")
    assert driver.k.state is TradingState.ACTIVE


def test_a_refused_fill_reduces_trading_where_so_configured_and_then_cancels_nothing():
    driver = Driver(*make(refused_fill_action="reduce"))
    order_id = working(driver, buy("100000", "1.1"))
    step = driver.fill(order_id, d("1500"), d("1.1"))
    assert driver.k.state is TradingState.REDUCING and not step.commands
    assert driver.k.orders.get(order_id).is_open


def test_a_final_fill_short_of_the_quantity_leaves_the_rest_working():
    driver = Driver(*make())
    order_id = working(driver, buy("100000", "1.1"))
    driver.fill(order_id, d("10000"), d("1.1"), final=True)
    order = driver.k.orders.get(order_id)
    assert (order.status, order.leaves_qty) == (OrderStatus.PARTIALLY_FILLED, d("90000"))
    assert driver.k.gate.working_orders()["EURUSD"] == (d("90000"), 0, 1)


def test_a_replace_nobody_asked_for_or_below_the_filled_quantity_is_refused():
    driver = Driver(*make())
    order_id = working(driver, buy("100000", "1.1"))
    unasked = OrderReplaced(ts_event=driver.ts, ts_init=driver.ts, order_id=order_id, symbol="EURUSD",
                            quantity=d("200000"), price=d("1.1"))
    assert refusal_of(driver.handle(unasked)) == "no replace of the order was asked for"
    assert driver.k.state is TradingState.HALTED
    driver = Driver(*make())
    order_id = working(driver, buy("100000", "1.1"))
    driver.fill(order_id, d("60000"), d("1.1"))
    driver.k.requests.append(ReplaceOrder(ts_event=driver.ts, ts_init=0, order_id=order_id, symbol="EURUSD",
                                          quantity=d("80000")))
    assert driver.handle(quote(driver.ts, "1.10000", "1.10002")).commands  # the replace went out
    below = OrderReplaced(ts_event=driver.ts, ts_init=driver.ts, order_id=order_id, symbol="EURUSD",
                          quantity=d("50000"), price=d("1.1"))
    assert refusal_of(driver.handle(below)) == "quantity 50000 is outside 60000 (filled) to 100000 (asked)"
    assert driver.k.gate.working_orders()["EURUSD"] == (d("40000"), 0, 1)


# --- 7. replaces -------------------------------------------------------------------------------------


def test_a_replace_is_checked_on_its_new_total_quantity():
    k, strategy = make(max_order_qty=Decimal(100_000))
    driver = Driver(k, strategy)
    order_id = working(driver, buy("100000", "1.1"))
    driver.fill(order_id, d("60000"), d("1.1"))
    replace = ReplaceOrder(ts_event=driver.ts, ts_init=0, order_id=order_id, symbol="EURUSD", quantity=d("150000"))
    denial = k.gate.check_replace(replace, k.orders.get(order_id), k)
    assert denial is not None and (denial.reason, denial.detail) == ("MAX_ORDER_QTY", "qty=150000 limit=100000")


# --- 8. limit changes apply in full --------------------------------------------------------------------


def test_tightening_the_order_throttle_inside_its_window_grants_no_budget():
    driver = Driver(*make(max_orders_per_window=50, max_messages_per_second=None, collar_bps=None))
    assert [v for v, _ in driver.ask(*[buy("1000", "1.1") for _ in range(50)])] == ["OK"] * 50
    driver.admin("limit", "set", "max_orders_per_window", "40")
    assert driver.ask(buy("1000", "1.1")) == [("ORDER_THROTTLE", "orders=41 limit=40")]
    driver.ts += 1_000_000_000  # the window has passed
    assert driver.ask(buy("1000", "1.1")) == [("OK", "")]


@pytest.mark.faults
def test_throttles_measure_on_the_time_inputs_were_taken_in_which_never_goes_backwards():
    """An input stamped an hour back (the system clock stepped back before the live clock held it, or an
    input taken in earlier that reached the bus later): the orders of the last window were counted as
    still recent, and every new order was refused for as long as the step lasted."""
    driver = Driver(*make(max_orders_per_window=2, max_messages_per_second=None, collar_bps=None))
    driver.ts = 10**13
    assert driver.ask(buy("1000", "1.1"), buy("1000", "1.1")) == [("OK", "")] * 2
    driver.ts += 2 * 10**9  # the window has passed ...
    held = driver.ts
    assert driver.ask() == []
    driver.ts -= 3600 * 10**9  # ... and the next inputs are stamped an hour earlier
    assert driver.ask(buy("1000", "1.1"), buy("1000", "1.1"), buy("1000", "1.1")) == [("OK", "")] * 2 + [
        ("ORDER_THROTTLE", "orders=3 limit=2")]
    assert driver.k.now_ns == held


def test_a_new_var_confidence_applies_to_the_var_book():
    driver = Driver(*make(max_var=Decimal(10**9), var_window=20, var_confidence=0.9, collar_bps=None))
    book = driver.k.gate.book_var
    driver.admin("limit", "set", "var_confidence", "0.95")
    assert driver.k.gate.book_var.k_by_used[20] == 1 and book.k_by_used[20] == 2
    driver.admin("limit", "set", "var_window", "10")
    assert driver.k.gate.book_var.window == 10


def test_a_duplicate_is_caught_however_many_orders_came_between():
    driver = Driver(*make(duplicate_window_ms=1000, max_orders_per_window=None, max_messages_per_second=None,
                          collar_bps=None))
    first = buy("1000", "1.09000")
    others = [buy("1000", f"1.{9000 - i:05d}") for i in range(1, 66)]
    verdicts = driver.ask(first, *others, first)
    assert verdicts[-1][0] == "DUPLICATE_ORDER"


# --- the fuzz test -------------------------------------------------------------------------------------

HOSTILE_INTS = st.one_of(st.integers(-(2**64), 2**64), st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63)]))
QTYS = st.integers(1, 100).map(lambda n: n * 1000 * UNIT)  # what a well-behaved strategy or venue sends
PRICES = st.integers(105_000, 115_000).map(lambda n: n * 10_000)  # around the reference, 1.05 to 1.15
ANYTHING = st.one_of(HOSTILE_INTS, st.floats(allow_nan=True), st.none(), st.text(max_size=3))
INT64 = HOSTILE_INTS.filter(lambda v: abs(v) < 2**63)  # what a message can carry


def mostly(usual, hostile):
    """Usual values three times in four: enough orders pass and fill for the hostile ones to meet state."""
    return st.integers(0, 3).flatmap(lambda i: hostile if i == 3 else usual)


LIMIT_NAMES = ["max_order_qty", "collar_bps", "collar_ticks", "max_gross_exposure", "max_net_exposure",
               "credit_limit", "max_position_long", "max_position_short", "max_open_qty", "max_open_orders",
               "max_orders_per_window", "duplicate_window_ms", "kelly_multiplier", "var_confidence", "max_var"]
LIMIT_VALUES = st.one_of(st.sampled_from(["off", "nan", "inf", "-1", "0", "1e30", "99999999999999999999", "abc"]),
                         st.integers(0, 10**7).map(str), st.decimals(0, 10**6, places=3).map(str))


class HostileKernel(RuleBasedStateMachine):
    """Arbitrary quotes, requests, venue reports and limit changes: the kernel never raises, and its gate's
    arrays always say what the portfolio and the order book say."""

    def __init__(self) -> None:
        super().__init__()
        self.driver = Driver(*make(max_gross_exposure=Decimal(10**8), credit_limit=Decimal(10**8),
                                   duplicate_window_ms=100, max_var=None))
        self.reports = 0

    @rule(bid=mostly(PRICES, INT64), spread=mostly(st.just(20_000), st.integers(-10, 10**6)))
    def a_quote(self, bid, spread):
        if abs(bid + spread) < 2**63:
            self.driver.handle(QuoteTick(ts_event=self.driver.ts, ts_init=0, symbol="EURUSD", bid=bid,
                                         ask=bid + spread))

    @rule(side=mostly(st.sampled_from([Side.BUY, Side.SELL]), st.just("BUY")), qty=mostly(QTYS, ANYTHING),
          kind=st.sampled_from(list(OrderType)), price=mostly(PRICES, ANYTHING), trigger=mostly(PRICES, INT64),
          reduce_only=mostly(st.just(False), st.just(True)), terms_right=mostly(st.just(True), st.just(False)))
    def a_request(self, side, qty, kind, price, trigger, reduce_only, terms_right):
        if terms_right:  # the prices the order's type needs, most of the time
            price = price if kind is OrderType.LIMIT else None
            trigger = trigger if kind is OrderType.STOP else None
        self.driver.ask(dict(symbol="EURUSD", side=side, quantity=qty, order_type=kind, price=price,
                             trigger_price=trigger, reduce_only=reduce_only))

    @rule(data=st.data())
    def a_report(self, data):
        ids = list(self.driver.k.orders.open) * 3 + list(self.driver.k.orders.by_id) + ["unknown"]
        order_id = data.draw(st.sampled_from(ids))
        order = self.driver.k.orders.by_id.get(order_id)
        side = order.side if order is not None else Side.BUY
        leaves = order.leaves_qty if order is not None and order.leaves_qty > 0 else 1000 * UNIT
        qty = data.draw(mostly(st.sampled_from([leaves, leaves // 2000 * 1000 or leaves]), st.one_of(QTYS, INT64)))
        price = data.draw(mostly(st.just(order.price) if order is not None and order.price else PRICES, INT64))
        self.reports += 1
        trade = data.draw(st.sampled_from(["t1", f"t{self.reports}", f"t{self.reports}"]))
        ts = self.driver.ts
        report = data.draw(st.sampled_from([
            OrderAccepted(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD", venue_order_id="v"),
            OrderCanceled(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD"),
            OrderReplaced(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD", quantity=qty, price=price),
            OrderPartiallyFilled(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD", side=side,
                                 trade_id=trade, last_qty=qty, last_price=price, leaves_qty=0),
            OrderPartiallyFilled(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD", side=side,
                                 trade_id=trade, last_qty=qty, last_price=price, leaves_qty=0),
            OrderFilled(ts_event=ts, ts_init=0, order_id=order_id, symbol="EURUSD", side=side, trade_id=trade,
                        last_qty=qty, last_price=price, leaves_qty=0),
        ]))
        self.driver.handle(report)

    @rule(data=st.data())
    def a_replace(self, data):
        open_ids = list(self.driver.k.orders.open)
        if open_ids:
            order_id = data.draw(st.sampled_from(open_ids))
            self.driver.k.requests.append(ReplaceOrder(
                ts_event=self.driver.ts, ts_init=0, order_id=order_id, symbol="EURUSD",
                quantity=data.draw(mostly(QTYS, ANYTHING)), price=data.draw(st.one_of(st.none(), PRICES, INT64))))
            self.driver.ask()

    @rule(name=st.sampled_from(LIMIT_NAMES), value=LIMIT_VALUES, now=st.integers(0, 3))
    def a_limit_change(self, name, value, now):
        if now == 3:  # now and then: most changes make the gate deny everything after them
            self.driver.admin("limit", "set", name, value)

    @rule(command=st.sampled_from(["halt", "resume", "resume", "resume", "reduce", "kill"]))
    def an_operator(self, command):
        self.driver.admin(command)

    @rule(ms=st.integers(0, 2_000))
    def time_passes(self, ms):
        self.driver.ts += ms * 1_000_000

    @invariant()
    def the_gates_arrays_equal_the_books(self):
        k = self.driver.k
        row = k.gate.rows["EURUSD"]
        position = k.portfolio.positions.get("EURUSD")
        assert row[rc.S_POSITION] == (position.quantity if position is not None else 0)
        open_orders = list(k.orders.open.values())
        assert row[rc.S_OPEN_BUY] == sum(o.leaves_qty for o in open_orders if o.side is Side.BUY)
        assert row[rc.S_OPEN_SELL] == sum(o.leaves_qty for o in open_orders if o.side is Side.SELL)
        assert row[rc.S_OPEN_ORDERS] == len(open_orders)
        assert all(0 <= o.filled_qty <= o.quantity for o in open_orders)
        assert set(k.gate.worth) <= {o.order_id for o in open_orders}
        assert not k.requests and not k._derived and not k._commands


HostileKernel.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_the_kernel_never_raises_and_its_arrays_follow_its_books = HostileKernel.TestCase
