"""The order lifecycle: every (status, event) pair either moves as the table says or raises."""

from __future__ import annotations

import itertools

import pytest

from foxhunt.core.orders import (
    TRANSITIONS,
    InvalidTransition,
    Order,
    Orders,
    OrderStatus,
    next_status,
)
from foxhunt.messages.orders import (
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderSubmitted,
    OrderType,
    Side,
    SubmitOrder,
    TimeInForce,
)

T = dict(ts_event=1, ts_init=1)
EVENTS = {
    OrderDenied: OrderDenied(**T, order_id="o", symbol="X", reason="R"),
    OrderSubmitted: OrderSubmitted(**T, order_id="o", symbol="X"),
    OrderAccepted: OrderAccepted(**T, order_id="o", symbol="X", venue_order_id="v1"),
    OrderRejected: OrderRejected(**T, order_id="o", symbol="X", reason="R"),
    OrderCanceled: OrderCanceled(**T, order_id="o", symbol="X"),
    OrderCancelRejected: OrderCancelRejected(**T, order_id="o", symbol="X", reason="R"),
    OrderReplaced: OrderReplaced(**T, order_id="o", symbol="X", quantity=10, price=5),
    OrderExpired: OrderExpired(**T, order_id="o", symbol="X"),
    OrderPartiallyFilled: OrderPartiallyFilled(
        **T, order_id="o", symbol="X", side=Side.BUY, trade_id="t", last_qty=1, last_price=5, leaves_qty=9
    ),
    OrderFilled: OrderFilled(
        **T, order_id="o", symbol="X", side=Side.BUY, trade_id="t", last_qty=10, last_price=5, leaves_qty=0
    ),
}


def _order(status: OrderStatus) -> Order:
    cmd = SubmitOrder(**T, order_id="o", strategy_id="s", symbol="X", side=Side.BUY, order_type=OrderType.LIMIT,
                      quantity=10, price=5, time_in_force=TimeInForce.GTC)
    order = Order.from_command(cmd)
    order.status = status
    return order


@pytest.mark.parametrize(
    ("status", "event_type"), list(itertools.product(OrderStatus, EVENTS)), ids=lambda v: getattr(v, "__name__", v)
)
def test_every_status_and_event_pair(status, event_type):
    order = _order(status)
    expected = TRANSITIONS.get((status, event_type))
    if expected is None:
        with pytest.raises(InvalidTransition, match=event_type.__name__):
            order.apply(EVENTS[event_type])
        assert order.status is status
    else:
        order.apply(EVENTS[event_type])
        if event_type is OrderFilled:  # all of the order (10 of 10): filled, whatever it was (canceled too)
            expected = OrderStatus.FILLED
        assert order.status is expected


def test_terminal_statuses_accept_only_late_answers():
    """A cancel's refusal that raced the end, a gate's denial, and for a canceled or expired order a fill
    that crossed its cancel or expiry."""
    for status in (OrderStatus.FILLED, OrderStatus.CANCELED, OrderStatus.EXPIRED):
        allowed = {event for (s, event) in TRANSITIONS if s is status}
        late_fills = set() if status is OrderStatus.FILLED else {OrderPartiallyFilled, OrderFilled}
        assert allowed == {OrderCancelRejected, OrderDenied} | late_fills
        assert all(next_status(status, EVENTS[e]) is status for e in allowed)


def test_fills_accumulate_and_an_overfill_is_a_bug():
    order = _order(OrderStatus.ACCEPTED)
    order.apply(EVENTS[OrderPartiallyFilled])
    assert (order.filled_qty, order.leaves_qty) == (1, 9)
    big = OrderPartiallyFilled(**T, order_id="o", symbol="X", side=Side.BUY, trade_id="t2", last_qty=20,
                               last_price=5, leaves_qty=0)
    with pytest.raises(InvalidTransition, match="overfilled"):
        order.apply(big)


def test_replace_changes_quantity_and_prices():
    order = _order(OrderStatus.ACCEPTED)
    order.apply(EVENTS[OrderReplaced])
    assert (order.quantity, order.price) == (10, 5)


def test_registry_tracks_open_orders_and_rejects_unknown_or_duplicate_ids():
    orders = Orders()
    order = _order(OrderStatus.INITIALIZED)
    orders.add(order)
    with pytest.raises(InvalidTransition, match="duplicate"):
        orders.add(order)
    orders.apply("o", EVENTS[OrderSubmitted])
    assert list(orders.open) == ["o"]
    orders.apply("o", EVENTS[OrderFilled])
    assert not orders.open
    with pytest.raises(InvalidTransition, match="unknown order"):
        orders.apply("nope", EVENTS[OrderFilled])
