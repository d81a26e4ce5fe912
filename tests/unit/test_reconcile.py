"""Reconciliation (adapters/venues/reconcile.py), one pure function for every venue: what a venue says of one of
our orders after a reconnection becomes the reports it would have sent, each case by itself. The FIX and IB
venue suites drive the same function through their protocols (tests/integration/test_fix_venue.py, test_ib_venue.py)."""

from __future__ import annotations

import pytest

from foxhunt.adapters.venues.reconcile import Seen, reconcile
from foxhunt.core.orders import Order, OrderStatus
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    OrderAccepted,
    OrderCanceled,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    Side,
    SubmitOrder,
    TimeInForce,
)

TS = 7


def order(status: OrderStatus = OrderStatus.ACCEPTED, filled: str = "0", order_type=OrderType.LIMIT) -> Order:
    o = Order.from_command(SubmitOrder(
        ts_event=1, ts_init=1, order_id="o-1", strategy_id="s", symbol="EURUSD", side=Side.BUY,
        order_type=order_type, quantity=d("300000"), price=d("1.1") if order_type is OrderType.LIMIT else None,
        time_in_force=TimeInForce.GTC,
    ))
    o.status, o.filled_qty = status, d(filled)
    return o


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_working_order_the_venue_works_as_believed_gives_nothing():
    assert reconcile(order(), Seen("working", quantity=d("300000"), price=d("1.1"), cum_qty=0), TS) == []


def test_a_missed_acknowledgement_is_reported():
    [accepted] = reconcile(order(OrderStatus.SUBMITTED), Seen("working", venue_order_id="V9"), TS)
    assert accepted == OrderAccepted(ts_event=TS, ts_init=TS, order_id="o-1", symbol="EURUSD", venue_order_id="V9")


def test_a_replace_lost_with_the_connection_takes_the_venues_terms():
    [replaced] = reconcile(order(), Seen("working", quantity=d("200000"), price=d("1.2")), TS)
    assert isinstance(replaced, OrderReplaced)
    assert (replaced.quantity, replaced.price, replaced.trigger_price) == (d("200000"), d("1.2"), None)


def test_a_market_orders_price_field_means_nothing():
    assert reconcile(order(order_type=OrderType.MARKET), Seen("working", price=d("1.2")), TS) == []


def test_executions_missed_are_booked_by_the_cumulative_quantity():
    [fill] = reconcile(order(filled="100000"), Seen("working", cum_qty=d("250000"), avg_price=d("1.1")), TS)
    assert isinstance(fill, OrderPartiallyFilled) and fill.trade_id == ""
    assert (fill.last_qty, fill.cum_qty, fill.leaves_qty, fill.last_price) == (
        d("150000"), d("250000"), d("50000"), d("1.1"))


def test_an_order_filled_while_away_ends_with_its_fill_whatever_else_is_said():
    out = reconcile(order(OrderStatus.SUBMITTED), Seen("filled", cum_qty=d("300000"), avg_price=d("1.1")), TS)
    assert kinds(out) == ["OrderFilled"] and isinstance(out[0], OrderFilled) and out[0].leaves_qty == 0


def test_a_partial_fill_then_a_cancel_at_the_venue():
    out = reconcile(order(), Seen("canceled", cum_qty=d("100000"), avg_price=d("1.1")), TS)
    assert kinds(out) == ["OrderPartiallyFilled", "OrderCanceled"]
    assert out[1].reason == "reconciled: canceled at the venue"
    assert reconcile(order(), Seen("canceled"), TS, where="IB")[0].reason == "reconciled: canceled at IB"


@pytest.mark.parametrize(("status", "expected"), [(OrderStatus.ACCEPTED, ["OrderExpired"]),
                                                  (OrderStatus.SUBMITTED, [])])
def test_an_expiry_ends_only_an_acknowledged_order(status, expected):
    out = reconcile(order(status), Seen("expired"), TS)
    assert kinds(out) == expected and all(isinstance(e, OrderExpired) for e in out)


def test_a_reject_of_an_unacknowledged_order_rejects_it_and_of_an_acknowledged_one_cancels_it():
    [rejected] = reconcile(order(OrderStatus.SUBMITTED), Seen("rejected", text="unknown order"), TS)
    assert isinstance(rejected, OrderRejected) and rejected.reason == "reconciled: unknown order"
    [canceled] = reconcile(order(), Seen("rejected"), TS)
    assert isinstance(canceled, OrderCanceled)
    assert canceled.reason == "reconciled: no longer working at the venue: rejected at the venue"


def test_no_replace_is_read_into_a_canceled_or_rejected_order():
    assert kinds(reconcile(order(), Seen("canceled", quantity=d("1000")), TS)) == ["OrderCanceled"]


def test_an_order_no_longer_working_gives_nothing():
    assert reconcile(order(OrderStatus.FILLED, filled="300000"), Seen("canceled", cum_qty=d("300000")), TS) == []
    assert reconcile(order(OrderStatus.CANCELED), Seen("working", cum_qty=d("100000")), TS) == []


def test_a_state_foxhunt_takes_no_action_on_still_books_its_quantities():
    out = reconcile(order(OrderStatus.SUBMITTED), Seen("other", cum_qty=d("100000"), avg_price=d("1.1")), TS)
    assert kinds(out) == ["OrderPartiallyFilled"]
