"""Reconciliation after a (re)connection: what a venue did to one of our orders that foxhunt did not hear.

One pure function for every venue. The venue adapter asks the venue about each working order the way its
protocol allows (FIX: an OrderStatusRequest or one OrderMassStatusRequest; Interactive Brokers: the open
orders and executions ib_async fetches at each connection), says what it was told as a `Seen`, and
`reconcile` turns that into the reports the venue would have sent, in the order it would have sent them:
a missed acknowledgement, a replace whose answer was lost with the connection, executions missed (by the
venue's cumulative quantity, where the venue gives no execution ids), and the end the venue reports.

It derives nothing from the order's past: the kernel books what is new (a fill by its cumulative quantity,
a report its lifecycle allows) and refuses the rest, so a report also heard on its own way is harmless.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from foxhunt.messages.base import Input
from foxhunt.messages.orders import (
    OrderAccepted,
    OrderCanceled,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
)
from foxhunt.ports import OrderView

# what a venue can say of an order it is asked about
State = Literal["working", "filled", "canceled", "expired", "rejected", "other"]


class Seen(NamedTuple):
    """What the venue says of one of our orders, in foxhunt's units."""

    # working: acknowledged and working (partly filled or not); other: not acknowledged yet, or a state
    # foxhunt takes no action on (FIX's done for day, suspended, ...)
    state: State
    venue_order_id: str = ""
    quantity: int | None = None  # its total quantity there (None: not said)
    price: int | None = None  # its limit price there (None: not said, or an order without one)
    cum_qty: int | None = None  # executed there so far (None: the adapter books the executions one by one)
    avg_price: int = 0  # the average price of what was executed
    text: str = "rejected at the venue"  # the venue's words, for a reject


def reconcile(order: OrderView, seen: Seen, ts: int, where: str = "the venue") -> list[Input]:
    """The reports that bring `order` (the kernel's view of it) to what the venue says (`seen`); `where`
    names the venue in a cancel's reason. Nothing for an order that is no longer working."""
    if not order.is_open:
        return []
    stamp = {"ts_event": ts, "ts_init": ts, "order_id": order.order_id, "symbol": order.symbol}
    out: list[Input] = []
    acknowledged = not order.unacknowledged
    if not acknowledged and seen.state == "working":  # its acknowledgement was missed
        out.append(OrderAccepted(**stamp, venue_order_id=seen.venue_order_id))
        acknowledged = True
    # a replace whose answer was lost with the connection: the venue's terms are the order's now (the price
    # only of a priced order; a market order's price field means nothing)
    quantity = seen.quantity if seen.quantity is not None else order.quantity
    limit = seen.price if seen.price is not None and order.price is not None else order.price
    if (acknowledged and seen.state not in ("canceled", "rejected")
            and (quantity, limit) != (order.quantity, order.price)):
        out.append(OrderReplaced(**stamp, quantity=quantity, price=limit, trigger_price=order.trigger_price))
    else:
        quantity = order.quantity
    cum = seen.cum_qty if seen.cum_qty is not None else order.filled_qty
    if cum > order.filled_qty:  # executions missed: booked by the cumulative quantity (no execution id)
        leaves = quantity - cum
        cls = OrderFilled if leaves <= 0 else OrderPartiallyFilled
        out.append(cls(**stamp, side=order.side, trade_id="", last_qty=cum - order.filled_qty,
                       last_price=seen.avg_price, leaves_qty=max(leaves, 0), cum_qty=cum))
        if cls is OrderFilled:
            return out
    if seen.state == "canceled":
        out.append(OrderCanceled(**stamp, reason=f"reconciled: canceled at {where}"))
    elif seen.state == "expired" and acknowledged:
        out.append(OrderExpired(**stamp))
    elif seen.state == "rejected":  # rejected, or (for most venues) not known at all
        if not acknowledged:
            out.append(OrderRejected(**stamp, reason=f"reconciled: {seen.text}"))
        else:  # it was acknowledged, so it did work there: now it does not
            out.append(OrderCanceled(**stamp, reason=f"reconciled: no longer working at {where}: {seen.text}"))
    return out
