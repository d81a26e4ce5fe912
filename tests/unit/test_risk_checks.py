"""The pre-trade checks: the compiled kernel against its plain-Python twin, every limit at its boundary,
and the engine's bookkeeping of working orders."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.core.kernel import Kernel
from foxhunt.core.risk import checks as rc
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import InstrumentRisk, RiskLimits
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import OrderAccepted, OrderType, ReplaceOrder, Side, SubmitOrder
from foxhunt.messages.system import TradingState
from tests.fakes import INSTRUMENTS, quote

UNL = rc.UNLIMITED
FLOW_OFF = np.array([UNL, 1, 0, UNL, 1, 0, 0, 0, 0, 0], dtype=np.int64)  # no throttles, no duplicate check, no self-match
TRADING = {rc.ACTIVE: "ACTIVE", rc.REDUCING: "REDUCING", rc.HALTED: "HALTED"}
RESTRICTED = {rc.OPEN: "open", rc.NO_TRADE: "no_trade", rc.REDUCE_ONLY_LIST: "reduce_only"}
B = 10**9  # one unit in nanos


def maybe(strategy):
    return st.one_of(st.just(UNL), strategy)


# what the engine may hold: any int64 above its minimum (the kernel refuses positions and prices beyond
# +-UNLIMITED), drawn from the whole range and its edges as well as from everyday sizes
WIDE = st.one_of(st.integers(-UNL, UNL), st.sampled_from([-UNL, -UNL + 1, -1, 0, 1, UNL - 1, UNL, 2**62, 10**18]))


def wide_or(strategy):
    return st.one_of(strategy, strategy, WIDE)


@st.composite
def cases(draw):
    lot, tick = draw(st.sampled_from([1 * B, 1000 * B, 1])), draw(st.sampled_from([10**4, 10**6, 1]))
    limits = dict(
        lot=lot, tick=tick, mult=draw(st.sampled_from([1, 50, 10**6])),
        min_qty=draw(wide_or(st.integers(0, 5).map(lambda n: n * lot)).map(abs)),
        max_qty=draw(maybe(wide_or(st.integers(1, 50).map(lambda n: n * lot)).map(abs))),
        max_notional_lt=draw(maybe(wide_or(st.integers(0, 10**9)).map(abs))),
        collar_bps=draw(maybe(st.one_of(st.integers(0, 2000), st.integers(0, 1_000_000)))),
        collar_ticks=draw(maybe(wide_or(st.integers(0, 500)).map(abs))),
        max_long=draw(maybe(wide_or(st.integers(0, 100).map(lambda n: n * lot)).map(abs))),
        max_short=draw(maybe(wide_or(st.integers(0, 100).map(lambda n: n * lot)).map(abs))),
        max_open_orders=draw(maybe(st.integers(0, 5))),
        max_open_qty=draw(maybe(wide_or(st.integers(0, 100).map(lambda n: n * lot)).map(abs))),
        ref_max_age=draw(maybe(st.integers(0, 10**10))), restricted=draw(st.sampled_from(list(RESTRICTED))),
        paused=draw(st.sampled_from([0, 0, 0, 26, 27])),
    )
    account = dict(max_gross=draw(st.sampled_from([float("inf"), 1e3, 1e6, 5e7, 1e30])),
                   max_net=draw(st.sampled_from([float("inf"), 1e3, 1e6, 1e30])),
                   credit=draw(st.sampled_from([float("inf"), 1e4, 1e6, 1e8])))
    has_price = draw(st.booleans())
    qty = draw(wide_or(st.integers(-1, 60).map(lambda n: n * lot + draw(st.sampled_from([0, 0, 0, 7])))))
    order = dict(side=draw(st.sampled_from([1, -1])), qty=qty,
                 price=draw(wide_or(st.integers(1, 3 * 10**5).map(lambda n: n * tick + draw(st.sampled_from([0, 0, 3])))))
                 if has_price else None,
                 reduce_only=draw(st.booleans()))
    order["total"] = rc._held(draw(st.sampled_from([qty, qty, qty + lot, 2 * qty])))
    ref = draw(st.sampled_from([0, 1])) * draw(wide_or(st.integers(1, 3 * 10**5).map(lambda n: n * tick)).map(abs))
    order["value_price"] = order["price"] if has_price else rc._held(ref + draw(st.integers(0, 10**6)))
    position = wide_or(st.integers(-60, 60).map(lambda n: n * lot)).map(lambda p: max(-(2**62), min(2**62, p)))
    state = dict(position=draw(position),  # the kernel holds positions within +-2**62
                 open_buy=draw(wide_or(st.integers(0, 30).map(lambda n: n * lot)).map(abs)),
                 open_sell=draw(wide_or(st.integers(0, 30).map(lambda n: n * lot)).map(abs)),
                 open_orders=draw(st.integers(0, 6)), ref=ref,
                 ref_age=draw(st.integers(0, 2 * 10**10)), trading=draw(st.sampled_from(list(TRADING))),
                 credit_used=draw(st.floats(0, 1e7)))
    others = [(draw(position), draw(st.integers(0, 30)) * B,
               draw(st.integers(0, 30)) * B, draw(st.integers(0, 3 * 10**5)) * 10**4, draw(st.sampled_from([1, 50])))
              for _ in range(draw(st.integers(0, 2)))]
    book = others[:]
    book.insert(draw(st.integers(0, len(others))), None)
    state["book"] = book
    same_side = state["open_buy"] if order["side"] > 0 else state["open_sell"]
    order["canceling"] = draw(st.sampled_from([0, same_side, same_side // 2]))
    return limits, account, order, state


def run_kernel(limits, account, order, state):
    def row_of(limit_values, position, open_buy, open_sell, open_orders, mark):
        return np.array(limit_values + [position, open_buy, open_sell, open_orders, 0, 0, 0, mark], dtype=np.int64)

    unlimited_row = [UNL] * (rc.L_PAUSED + 1)
    rows, row_at = [], rc.E_ROWS
    for i, other in enumerate(state["book"]):
        if other is None:
            row_at = rc.E_ROWS + i * rc.ROW_FIELDS
            rows.append(row_of([limits[k] for k in (
                "lot", "tick", "mult", "min_qty", "max_qty", "max_notional_lt", "collar_bps", "collar_ticks",
                "max_long", "max_short", "max_open_orders", "max_open_qty", "ref_max_age")]
                + [limits["restricted"], limits["paused"]], state["position"], state["open_buy"], state["open_sell"],
                state["open_orders"], 0))
        else:
            position, buys, sells, mark, mult = other
            limit_values = unlimited_row[:]
            limit_values[rc.L_MULT] = mult
            rows.append(row_of(limit_values, position, buys, sells, 1, mark))
    engine = rc.engine_state(np.array([account["max_gross"], account["max_net"], account["credit"], 0.0, 0.0]), rows,
                             FLOW_OFF)
    code = rc.kernels().check_order_nb(
        engine, row_at, order["side"], order["qty"], order["total"], order["price"] or 0, order["price"] is not None,
        order["reduce_only"], state["ref"], state["ref_age"], 0, 0, 0, order["canceling"], state["trading"],
        state["credit_used"], order["value_price"], 0, 0, 0,
    )
    return rc.REASONS.get(code, "OK"), engine[rc.E_ACCOUNT : rc.E_ROWS].view(np.float64)[rc.A_VALUE :]


@settings(max_examples=2500, deadline=None)
@given(cases())
def test_the_compiled_kernel_agrees_with_its_plain_python_twin(case):
    """Over the whole int64 range: no sum or product in the kernel wraps."""
    limits, account, order, state = case
    name, out = run_kernel(limits, account, order, state)
    twin_limits = {**limits, "restricted": RESTRICTED[limits["restricted"]]}
    twin_state = {**state, "trading": TRADING[state["trading"]]}
    twin_name, twin_detail = rc.check_order_py(twin_limits, account, order, twin_state)
    assert name == twin_name
    if twin_detail:
        assert tuple(out) == pytest.approx(twin_detail, rel=1e-12)


def engine_kernel(**limits) -> Kernel:
    return Kernel(INSTRUMENTS, [], PreTradeGate(RiskLimits(**limits), INSTRUMENTS))


def submit(k: Kernel, qty: str, price: str | None = None, side: Side = Side.BUY, reduce_only=False):
    cmd = SubmitOrder(ts_event=k.ts_event, ts_init=0, order_id=f"o{k.seq}", strategy_id="t", symbol="EURUSD",
                      side=side, order_type=OrderType.LIMIT if price else OrderType.MARKET, quantity=d(qty),
                      price=d(price) if price else None, reduce_only=reduce_only)
    denial = k.gate.check_submit(cmd, k)
    return "OK" if denial is None else f"{denial.reason}: {denial.detail}"


def fresh(**limits) -> Kernel:
    k = engine_kernel(**limits)
    k.handle(1, quote(1_000, "1.09990", "1.10010"))  # reference mid 1.10000
    return k


@pytest.mark.parametrize(
    ("limits", "at_limit", "past_limit", "denial"),
    [
        (dict(max_order_qty=Decimal(1_000_000)), ("1000000",), ("1001000",), "MAX_ORDER_QTY: qty=1001000 limit=1000000"),
        (dict(min_order_qty=Decimal(5000)), ("5000",), ("4000",), "MIN_ORDER_QTY: qty=4000 limit=5000"),
        (dict(max_order_notional=Decimal(110_000)), ("100000", "1.10000"), ("101000", "1.10000"),
         "MAX_ORDER_NOTIONAL: notional=111100 limit=110000"),
        (dict(collar_ticks=10), ("1000", "1.10010"), ("1000", "1.10011"), "PRICE_COLLAR_TICKS: price_away=0.00011 limit=0.0001"),
        (dict(collar_bps=100), ("1000", "1.11100"), ("1000", "1.11101"),
         "PRICE_COLLAR_PCT: price_away=0.01101 reference=1.1"),
        (dict(max_position_long=Decimal(3000)), ("3000",), ("4000",), "MAX_POSITION_LONG: worst_case=4000 limit=3000"),
        (dict(max_open_qty=Decimal(2000)), ("2000",), ("3000",), "MAX_OPEN_QTY: open_qty=3000 limit=2000"),
        # exposure is valued at the reference price (1.1), whatever the order's limit
        (dict(max_gross_exposure=Decimal(2200)), ("2000", "1.10001"), ("3000", "1.10000"),
         "MAX_GROSS_EXPOSURE: value=3300.00 limit=2200.00"),
        (dict(max_net_exposure=Decimal(2200)), ("2000",), ("3000",), "MAX_NET_EXPOSURE: value=3300.00 limit=2200.00"),
        (dict(credit_limit=Decimal(1100)), ("1000", "1.10000"), ("1000", "1.10001"), "CREDIT_LIMIT: value=1100.01 limit=1100.00"),
    ],
)
def test_each_limit_turns_exactly_at_its_boundary(limits, at_limit, past_limit, denial):
    k = fresh(**limits)
    assert submit(k, *at_limit) == "OK"
    assert submit(k, *past_limit) == denial


def test_lot_tick_state_restriction_and_reference_denials():
    k = fresh()
    assert submit(k, "1500") == "INVALID_LOT: qty=1500 lot=1000"
    assert submit(k, "1000", "1.100005") == "INVALID_TICK: price=1.100005 tick=0.00001"
    k.trading.state = TradingState.HALTED
    assert submit(k, "1000") == "TRADING_HALTED: symbol=EURUSD"
    k.trading.state = TradingState.ACTIVE
    assert submit(k, "1000", reduce_only=True) == "REDUCE_ONLY: symbol=EURUSD"
    restricted = fresh(instruments={"EURUSD": InstrumentRisk(restricted="no_trade")})
    assert submit(restricted, "1000") == "RESTRICTED: symbol=EURUSD"
    blind = engine_kernel()
    assert submit(blind, "1000") == "NO_REFERENCE_PRICE: symbol=EURUSD"
    stale = fresh(reference_max_age_ms=1000)
    stale.ts_event = 1_000 + 1_000_000_000  # exactly one second later: still fresh
    assert submit(stale, "1000") == "OK"
    stale.ts_event += 1
    assert submit(stale, "1000") == "STALE_REFERENCE_PRICE: age_ms=1000 limit_ms=1000"


def test_per_instrument_overrides_win_over_the_defaults():
    k = fresh(max_order_qty=Decimal(1000), instruments={"EURUSD": InstrumentRisk(max_order_qty=Decimal(2000))})
    assert submit(k, "2000") == "OK"
    with pytest.raises(ValueError, match="not configured: XAUUSD"):
        PreTradeGate(RiskLimits(instruments={"XAUUSD": InstrumentRisk()}), INSTRUMENTS)


def test_working_orders_are_tracked_through_their_events_and_count_against_limits():
    k = fresh(max_open_orders=2, max_position_long=Decimal(5000))
    risk = k.gate
    for i in (1, 2):
        cmd = SubmitOrder(ts_event=1_000, ts_init=0, order_id=f"w{i}", strategy_id="t", symbol="EURUSD", side=Side.BUY,
                          order_type=OrderType.LIMIT, quantity=d("2000"), price=d("1.09"))
        k.requests.append(cmd)
        k.handle(10 + i, quote(1_000, "1.09990", "1.10010"))
    assert risk.working_orders()["EURUSD"] == (d("4000"), 0, 2)
    assert submit(k, "1000") == "MAX_OPEN_ORDERS: open_orders=3 limit=2"
    k.handle(20, OrderAccepted(ts_event=1_000, ts_init=0, order_id="w1", symbol="EURUSD", venue_order_id="v1"))
    replace = ReplaceOrder(ts_event=1_000, ts_init=0, order_id="w1", symbol="EURUSD", quantity=d("4000"))
    denial = risk.check_replace(replace, k.orders.get("w1"), k)
    assert denial is not None and denial.detail == "worst_case=6000 limit=5000"  # 2000 elsewhere + 4000
    from foxhunt.messages.orders import OrderCanceled

    k.handle(21, OrderCanceled(ts_event=1_000, ts_init=0, order_id="w1", symbol="EURUSD"))
    assert risk.working_orders()["EURUSD"] == (d("2000"), 0, 1)
    assert risk.working_value == pytest.approx(2000 * 1.09)


def submit_at(k: Kernel, ts: int, qty: str = "1000", price: str | None = None, side: Side = Side.BUY):
    k.ts_event = k.now_ns = ts  # an input taken in at ts (the throttles measure on now_ns)
    return submit(k, qty, price, side)


def test_order_throttle_turns_at_the_limit_and_frees_up_as_the_window_moves():
    k = fresh(max_orders_per_window=3, order_window_ms=1000, max_messages_per_second=None)
    assert [submit_at(k, 1_000 + i, str(1000 * (i + 1))) for i in range(3)] == ["OK"] * 3
    assert submit_at(k, 1_003, "9000") == "ORDER_THROTTLE: orders=4 limit=3"
    assert submit_at(k, 1_000 + 999_999_999, "9000") == "ORDER_THROTTLE: orders=4 limit=3"  # 1 ns short
    assert submit_at(k, 1_000 + 1_000_000_000, "9000") == "OK"  # the first order has left the window


def test_cancels_count_as_messages_but_always_pass():
    k = fresh(max_messages_per_second=2, max_orders_per_window=None)
    assert submit_at(k, 5_000) == "OK"
    k.gate.note_cancel(5_001)
    assert submit_at(k, 5_002, "2000") == "MESSAGE_THROTTLE: messages=3 limit=2"


def test_an_identical_order_inside_the_duplicate_window_is_denied():
    k = fresh(duplicate_window_ms=500)
    assert submit_at(k, 1_000, "3000", "1.09000") == "OK"
    assert submit_at(k, 2_000, "3000", "1.09000") == "DUPLICATE_ORDER: age_ms=0 window_ms=500"
    assert submit_at(k, 2_000, "3000", "1.09001") == "OK"  # another price is another order
    assert submit_at(k, 1_000 + 500_000_000, "3000", "1.09000") == "OK"  # the window has passed


def test_an_order_that_would_trade_with_our_own_resting_order_is_denied():
    k = fresh()
    resting = SubmitOrder(ts_event=1_000, ts_init=0, order_id="rest", strategy_id="t", symbol="EURUSD",
                          side=Side.SELL, order_type=OrderType.LIMIT, quantity=d("1000"), price=d("1.10005"))
    k.requests.append(resting)
    k.handle(3, quote(1_000, "1.09990", "1.10010"))
    assert submit_at(k, 1_000, "1000", "1.10004") == "OK"
    assert submit_at(k, 1_000, "2000", "1.10005") == "SELF_MATCH: price=1.10005 own_resting=1.10005"
    assert submit_at(k, 1_000, "3000") == "SELF_MATCH: price=0 own_resting=1.10005"  # a market buy
    assert submit_at(k, 1_000, "1000", "1.10010", side=Side.SELL) == "OK"  # same side never matches


@st.composite
def flows(draw):
    limits = dict(order_limit=draw(st.one_of(st.none(), st.integers(0, 4))), order_window=draw(st.integers(1, 50)),
                  msg_limit=draw(st.one_of(st.none(), st.integers(0, 5))), msg_window=draw(st.integers(1, 50)),
                  dup_window=draw(st.integers(1, 50)), dup_slots=draw(st.sampled_from([0, 1, 3])))
    now, actions = 1, []
    for _ in range(draw(st.integers(1, 40))):
        now += draw(st.integers(0, 15))
        if draw(st.integers(0, 4)) == 0:
            actions.append(("cancel", now))
        else:
            price = draw(st.one_of(st.none(), st.integers(90, 110)))
            actions.append(("order", now, draw(st.sampled_from([1, -1])), price, draw(st.integers(1, 3)),
                            draw(st.sampled_from([0, 95])), draw(st.sampled_from([0, 105]))))
    return limits, actions


@settings(max_examples=1500, deadline=None)
@given(flows())
def test_the_flow_checks_agree_with_their_plain_python_twin(case):
    from foxhunt.core.risk.gate import flow_state
    from foxhunt.core.risk.limits import RiskLimits

    limits, actions = case
    ms = 1_000_000
    flow = flow_state(RiskLimits(max_orders_per_window=limits["order_limit"], max_messages_per_second=limits["msg_limit"],
                                 duplicate_window_ms=limits["dup_window"] if limits["dup_slots"] else None))
    # the kernel's windows are configured in ms; the twin's, and the times, count in ms too
    flow[rc.F_ORDER_WINDOW], flow[rc.F_MSG_WINDOW] = limits["order_window"] * ms, limits["msg_window"] * ms
    if limits["dup_slots"]:
        flow[rc.F_DUP_WINDOW] = limits["dup_window"] * ms
        flow = np.concatenate([flow[: len(flow) - 2 * flow[rc.F_DUP_SLOTS]], np.zeros(2 * limits["dup_slots"], np.int64)])
        flow[rc.F_DUP_SLOTS] = limits["dup_slots"]
    twin = rc.FlowPy(limits["order_limit"], limits["order_window"] * ms, limits["msg_limit"],
                     limits["msg_window"] * ms, limits["dup_window"] * ms, limits["dup_slots"])
    k = rc.kernels()
    row = np.full(rc.ROW_FIELDS, UNL, dtype=np.int64)
    row[rc.L_LOT], row[rc.L_TICK], row[rc.L_MULT], row[rc.L_MIN_QTY], row[rc.L_RESTRICTED] = 1, 1, 1, 0, rc.OPEN
    row[rc.L_PAUSED :] = 0
    engine = rc.engine_state(np.array([np.inf, np.inf, np.inf, 0.0, 0.0]), [row], flow)
    row, flow = engine[rc.E_ROWS : rc.E_ROWS + rc.ROW_FIELDS], engine[engine[rc.E_FLOW_AT] :]  # views
    for action in actions:
        if action[0] == "cancel":
            k.record_message_nb(flow, action[1] * ms)
            twin.cancel(action[1] * ms)
            continue
        _, now, side, price, terms, own_bid, own_ask = action
        row[rc.S_OWN_BID], row[rc.S_OWN_ASK] = own_bid, own_ask
        code = k.check_order_nb(engine, rc.E_ROWS, side, 1, 1, price or 0, price is not None, 0, 100, 0, 0, 0, 0,
                                0, rc.ACTIVE, 0.0, 100, now * ms, terms, 0)
        key = (side, terms, price or 0)  # what the kernel's duplicate key is made of, in this test
        assert rc.REASONS.get(code, "OK") == twin.check(side, price, now * ms, key, own_bid, own_ask), action


def test_the_kelly_cap_sizes_orders_that_carry_an_edge_estimate():
    k = fresh(kelly_capital=Decimal(1_000_000), kelly_multiplier=0.5, kelly_max_leverage=1.0)

    def order(qty: str, p: float | None, b: float | None = 1.0) -> str:
        cmd = SubmitOrder(ts_event=1_000, ts_init=0, order_id=f"k{qty}{p}", strategy_id="t", symbol="EURUSD",
                          side=Side.BUY, order_type=OrderType.LIMIT, quantity=d(qty), price=d("1.10000"),
                          edge_win_prob=p, edge_payoff=b)
        denial = k.gate.check_submit(cmd, k)
        return "OK" if denial is None else f"{denial.reason}: {denial.detail}"

    # p=0.6 on an even bet: f* = 0.2, half of it 0.1: 100,000 of capital, so 90,000 units at 1.1 = 99,000
    assert order("90000", 0.6) == "OK"
    assert order("91000", 0.6) == "KELLY_SIZE: notional=100100.00 limit=100000.00 kelly_fraction=0.1000"
    assert order("1000", 0.4).startswith("KELLY_SIZE")  # no edge: Kelly stakes nothing
    assert order("1000", 1.5) == "KELLY_EDGE_INVALID: win_prob=1.5 payoff=1.0"
    assert order("900000", None) == "OK"  # no estimate: not Kelly-sized
