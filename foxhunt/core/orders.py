"""The order lifecycle as one transition table, and the kernel's registry of orders.

An event that the table does not allow for the order's status raises: the kernel refuses such a report
from a venue before it gets here (Kernel._admit, OrderReportRefused), so for anything else it is a bug.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import cast

from foxhunt.messages.base import Enum
from foxhunt.messages.orders import (
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
    OrderSubmitted,
    OrderType,
    Side,
    SubmitOrder,
    TimeInForce,
)


class OrderStatus(Enum):
    INITIALIZED = "INITIALIZED"
    DENIED = "DENIED"
    SUBMITTED = "SUBMITTED"
    ACCEPTED = "ACCEPTED"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    CANCELED = "CANCELED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"


S = OrderStatus
OPEN_STATUSES = frozenset({S.SUBMITTED, S.ACCEPTED, S.PARTIALLY_FILLED})

# (status, event type) -> next status. Working orders may also be denied a cancel or replace by the gate,
# or by the venue (OrderCancelRejected): both leave them as they are. A cancel reject can also arrive
# after the order filled or was canceled: the venue answered a cancel that raced the end of the order.
_WORKING_EXITS = {
    OrderPartiallyFilled: S.PARTIALLY_FILLED,
    OrderFilled: S.FILLED,
    OrderCanceled: S.CANCELED,
    OrderExpired: S.EXPIRED,
}
TRANSITIONS: dict[tuple[OrderStatus, type], OrderStatus] = {
    (S.INITIALIZED, OrderDenied): S.DENIED,
    (S.INITIALIZED, OrderSubmitted): S.SUBMITTED,
    (S.SUBMITTED, OrderAccepted): S.ACCEPTED,
    (S.SUBMITTED, OrderRejected): S.REJECTED,
    (S.SUBMITTED, OrderDenied): S.SUBMITTED,
    (S.SUBMITTED, OrderCancelRejected): S.SUBMITTED,
    **{(S.SUBMITTED, event): status for event, status in _WORKING_EXITS.items()},
    (S.ACCEPTED, OrderReplaced): S.ACCEPTED,
    (S.ACCEPTED, OrderDenied): S.ACCEPTED,
    (S.ACCEPTED, OrderCancelRejected): S.ACCEPTED,
    **{(S.ACCEPTED, event): status for event, status in _WORKING_EXITS.items()},
    (S.PARTIALLY_FILLED, OrderReplaced): S.PARTIALLY_FILLED,
    (S.PARTIALLY_FILLED, OrderDenied): S.PARTIALLY_FILLED,
    (S.PARTIALLY_FILLED, OrderCancelRejected): S.PARTIALLY_FILLED,
    **{(S.PARTIALLY_FILLED, event): status for event, status in _WORKING_EXITS.items()},
    (S.FILLED, OrderCancelRejected): S.FILLED,
    (S.CANCELED, OrderCancelRejected): S.CANCELED,
    (S.EXPIRED, OrderCancelRejected): S.EXPIRED,
    (S.FILLED, OrderDenied): S.FILLED,
    (S.CANCELED, OrderDenied): S.CANCELED,
    (S.EXPIRED, OrderDenied): S.EXPIRED,
    (S.REJECTED, OrderDenied): S.REJECTED,
    (S.DENIED, OrderDenied): S.DENIED,
}


class InvalidTransition(Exception):
    """An order event arrived that the lifecycle does not allow: a bug, never a market outcome."""


def next_status(status: OrderStatus, event: object) -> OrderStatus:
    try:
        return TRANSITIONS[(status, type(event))]
    except KeyError:
        raise InvalidTransition(f"{type(event).__name__} not allowed for an order in {status.value}") from None


@dataclass(slots=True)
class Order:
    """The kernel's view of one order, changed only by `apply`."""

    order_id: str
    strategy_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: int
    price: int | None
    trigger_price: int | None
    time_in_force: TimeInForce
    reduce_only: bool
    status: OrderStatus = S.INITIALIZED
    filled_qty: int = 0
    venue_order_id: str = ""
    uncertain: bool = False  # working when its venue went down, not reconciled since (OrdersUncertain)

    @classmethod
    def from_command(cls, cmd: SubmitOrder) -> Order:
        # positional, in the order of the fields above: a third of the time of the same call by keyword
        return cls(cmd.order_id, cmd.strategy_id, cmd.symbol, cmd.side, cmd.order_type, cmd.quantity, cmd.price,
                   cmd.trigger_price, cmd.time_in_force, cmd.reduce_only)

    @property
    def leaves_qty(self) -> int:
        return self.quantity - self.filled_qty

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    def apply(self, event: OrderEvent) -> None:
        kind = type(event)  # messages are final classes: exact types, as the transition table has them
        self.status = TRANSITIONS.get((self.status, kind)) or next_status(self.status, event)  # which raises
        if kind is OrderFilled or kind is OrderPartiallyFilled:
            self.filled_qty += cast(OrderFilled, event).last_qty
            if self.filled_qty > self.quantity:
                raise InvalidTransition(f"order {self.order_id} overfilled: {self.filled_qty} > {self.quantity}")
        elif kind is OrderAccepted:
            self.venue_order_id = cast(OrderAccepted, event).venue_order_id
        elif kind is OrderReplaced:
            replaced = cast(OrderReplaced, event)
            self.quantity = replaced.quantity
            self.price = replaced.price
            self.trigger_price = replaced.trigger_price


# Closed orders the kernel remembers, the most recently closed: enough for any late report (a fill racing
# a cancel, a cancel reject) to find its order, while memory stays flat however long the daemon runs. A
# report for an order forgotten since is refused as for an unknown order (Kernel._admit).
CLOSED_KEPT = 10_000


class Orders:
    """The open orders and the CLOSED_KEPT most recently closed, by id, and the open ones in submission
    order (dicts keep insertion order)."""

    def __init__(self, closed_kept: int = CLOSED_KEPT) -> None:
        self.by_id: dict[str, Order] = {}
        self.open: dict[str, Order] = {}
        self.closed: deque[str] = deque()  # ids of the closed orders in by_id, in the order they closed
        self.closed_kept = closed_kept
        self.count = 0  # orders ever added
        self.denied = 0  # of them, denied by the pre-trade check

    def add(self, order: Order) -> None:
        if order.order_id in self.by_id:
            raise InvalidTransition(f"duplicate order id {order.order_id}")
        self.by_id[order.order_id] = order
        self.count += 1

    def get(self, order_id: str) -> Order:
        try:
            return self.by_id[order_id]
        except KeyError:
            raise InvalidTransition(f"event for unknown order {order_id}") from None

    def apply(self, order_id: str, event: OrderEvent) -> Order:
        order = self.get(order_id)
        self.apply_to(order, event)
        return order

    def apply_to(self, order: Order, event: OrderEvent) -> None:
        """`apply` for an order already in hand (the kernel's order path)."""
        before = order.status
        order.apply(event)
        if order.status in OPEN_STATUSES:
            self.open[order.order_id] = order
        elif before in OPEN_STATUSES or before is S.INITIALIZED:  # it closed now
            self.open.pop(order.order_id, None)
            self._closed(order)

    def _closed(self, order: Order) -> None:
        if order.status is S.DENIED:
            self.denied += 1
        closed = self.closed
        closed.append(order.order_id)
        if len(closed) > self.closed_kept:
            del self.by_id[closed.popleft()]

    def open_for(self, symbol: str, strategy_id: str | None = None) -> list[Order]:
        return [
            o
            for o in self.open.values()
            if o.symbol == symbol and (strategy_id is None or o.strategy_id == strategy_id)
        ]
