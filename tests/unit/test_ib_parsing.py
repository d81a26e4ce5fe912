"""Interactive Brokers mapping: orders and contracts out, error codes sorted, IB's floats made exact."""

from __future__ import annotations

import pytest

from foxhunt.adapters.venues.ib import parsing
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import Instrument
from foxhunt.messages.orders import OrderType, Side, SubmitOrder, TimeInForce

AAPL = Instrument(symbol="AAPL", tick_size=d("0.01"), lot_size=d("1"), currency="USD")


def cmd(order_type: OrderType, **kw) -> SubmitOrder:
    return SubmitOrder(ts_event=1, ts_init=1, order_id="ema-7-1", strategy_id="ema", symbol="AAPL", side=Side.SELL,
                       order_type=order_type, quantity=d("150"), time_in_force=TimeInForce.DAY, **kw)


def test_orders_carry_the_order_id_in_order_ref_and_exact_prices():
    limit = parsing.order(cmd(OrderType.LIMIT, price=d("189.37")), account="DU1")
    assert (limit.action, limit.totalQuantity, limit.orderType, limit.lmtPrice, limit.tif) == (
        "SELL", 150.0, "LMT", 189.37, "DAY")
    assert (limit.orderRef, limit.account) == ("ema-7-1", "DU1")
    stop = parsing.order(cmd(OrderType.STOP, trigger_price=d("180")))
    assert (stop.orderType, stop.auxPrice) == ("STP", 180.0)
    assert parsing.order(cmd(OrderType.MARKET)).orderType == "MKT"


def test_contracts_for_stocks_futures_and_currency_pairs():
    stock = parsing.contract(AAPL, "STK", "")
    assert (stock.secType, stock.symbol, stock.exchange, stock.currency) == ("STK", "AAPL", "SMART", "USD")
    fx = parsing.contract(Instrument(symbol="EURUSD", tick_size=1, lot_size=1, currency="USD"), "CASH", "")
    assert (fx.secType, fx.symbol, fx.currency, fx.exchange) == ("CASH", "EUR", "USD", "IDEALPRO")
    future = parsing.contract(Instrument(symbol="ES", tick_size=1, lot_size=1, currency="USD"), "FUT", "CME", "202612")
    assert (future.secType, future.lastTradeDateOrContractMonth, future.exchange) == ("FUT", "202612", "CME")
    with pytest.raises(ValueError, match="unsupported security type 'OPT'"):
        parsing.contract(AAPL, "OPT", "")


@pytest.mark.parametrize("code, kind", [
    (201, "ends_order"), (103, "reject"), (10148, "cancel_reject"), (202, "ends_order"), (1100, "connection"),
    (1102, "connection"), (504, "connection"), (2104, "warning"), (2158, "warning"), (2110, "connection"),
    (399, "other"), (462, "other"),
])
def test_tws_error_codes_are_sorted(code, kind):
    assert parsing.error_kind(code) == kind


@pytest.mark.parametrize("code, acknowledged, modifying, meaning", [
    (201, True, False, "rejected"), (202, True, False, "canceled"), (202, False, False, "canceled"),
    (103, False, False, "rejected"),  # a new order IB refused
    (104, True, True, "modify_refused"), (110, True, False, "none"),  # a live order: only a change failed
    (10147, True, False, "cancel_refused"), (161, True, False, "cancel_refused"), (10148, False, False, "cancel_refused"),
    (462, True, False, "none"), (399, True, True, "none"), (2104, True, False, "none"),  # say nothing of an end
])
def test_only_codes_that_say_so_end_an_order(code, acknowledged, modifying, meaning):
    assert parsing.order_error(code, acknowledged, modifying) == meaning


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e308, 1e10, "99999999999"])
def test_what_is_no_number_foxhunt_holds_is_refused(value):
    """A hostile broker's NaN price, infinite commission or 1e308 shares: refused at the edge, where the
    report is journaled as rejected, never booked (int64 nanos hold 9.2 billion units)."""
    with pytest.raises((ValueError, ArithmeticError)):
        parsing.fixed(value)


def test_ibs_floats_become_exact_fixed_point():
    assert parsing.fixed(1.1) == d("1.1")
    assert parsing.fixed(0.1 + 0.2) == d("0.3")  # 0.30000000000000004, rounded at the ninth decimal
    assert parsing.fixed(20000.0) == d("20000")
    assert parsing.fixed("189.37") == d("189.37")


def test_an_order_status_the_decoder_would_misread_is_named():
    good = ["3", "7", "Submitted", "0", "20000", "0", "101", "0", "0", "7", "", "0"]
    assert parsing.unreadable_order_status(good) == ""
    assert parsing.unreadable_order_status(good[:-1]) == "10 fields, 11 expected"  # the decoder would drop it silently
    assert parsing.unreadable_order_status(good[:3] + ["abc"] + good[4:]) == "field 3 is 'abc', not a number"
    assert parsing.unreadable_order_status(["3", "seven"] + good[2:]) == "field 1 is 'seven', not a whole number"
    assert parsing.message_name(["11"]) == "execDetails" and parsing.message_name(["x"]) == "message without an id"
    assert parsing.message_name(["999"]) == "message 999"
