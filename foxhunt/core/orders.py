"""The order lifecycle as one transition table, the rules a venue's report must meet, and the kernel's
registry of orders.

An event that the table does not allow for the order's status raises: the kernel refuses such a report
from a venue before it gets here (`refusal`, recorded as OrderReportRefused), so for anything else it is a
bug. A fill is booked once: the order keeps the execution ids it has applied and the cumulative quantity a
reconciliation booked (`duplicate`), so a venue's resend after a restart finds them in the journal's
state, not in an adapter's memory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final, cast

import msgspec
from mypy_extensions import mypyc_attr

from foxhunt.messages.base import Enum, format_fixed
from foxhunt.messages.orders import (
    CLOSED_KEPT,
    Fill,
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
OPEN_STATUSES: Final = frozenset({S.SUBMITTED, S.ACCEPTED, S.PARTIALLY_FILLED})
# the statuses and reports the order path compares with, as Final names: compiled by mypyc, a Final is a C
# static, where `S.FILLED` is a lookup through the Enum class (0.1 us) and a module global one in a namespace
_INITIALIZED: Final = S.INITIALIZED
_DENIED: Final = S.DENIED
_SUBMITTED: Final = S.SUBMITTED
_ACCEPTED: Final = S.ACCEPTED
_PARTIALLY_FILLED: Final = S.PARTIALLY_FILLED
_FILLED: Final = S.FILLED
_CANCELED: Final = S.CANCELED
_EXPIRED: Final = S.EXPIRED
_BUY: Final = Side.BUY
_LIMIT: Final = OrderType.LIMIT
_FILL: Final = OrderFilled
_PARTIAL_FILL: Final = OrderPartiallyFilled
_ACCEPTED_REPORT: Final = OrderAccepted
_REPLACED_REPORT: Final = OrderReplaced

# (status, event type) -> next status. Working orders may also be denied a cancel or replace by the gate,
# or by the venue (OrderCancelRejected): both leave them as they are. A cancel reject can also arrive
# after the order filled or was canceled: the venue answered a cancel that raced the end of the order. And
# a fill can arrive after the order was canceled or expired: an execution the venue made as the cancel
# crossed it, reported behind the cancel. It is booked (the money moved); the order stays closed, or is
# filled if that was all of it (`Order.apply`).
_WORKING_EXITS = {
    OrderPartiallyFilled: S.PARTIALLY_FILLED,
    OrderFilled: S.FILLED,
    OrderCanceled: S.CANCELED,
    OrderExpired: S.EXPIRED,
}
TRANSITIONS: Final[dict[tuple[OrderStatus, type], OrderStatus]] = {
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
    (S.CANCELED, OrderPartiallyFilled): S.CANCELED,
    (S.CANCELED, OrderFilled): S.CANCELED,
    (S.EXPIRED, OrderPartiallyFilled): S.EXPIRED,
    (S.EXPIRED, OrderFilled): S.EXPIRED,
    (S.FILLED, OrderDenied): S.FILLED,
    (S.CANCELED, OrderDenied): S.CANCELED,
    (S.EXPIRED, OrderDenied): S.EXPIRED,
    (S.REJECTED, OrderDenied): S.REJECTED,
    (S.DENIED, OrderDenied): S.DENIED,
}


# the same table by status, then by the event's type: two lookups by pointers' hashes, where a key of both is
# a tuple to make and hash (the order path looks up five an order)
_NEXT: Final[dict[OrderStatus, dict[type, OrderStatus]]] = {
    status: {event: after for (before, event), after in TRANSITIONS.items() if before is status} for status in S
}


def _open(status: OrderStatus) -> bool:
    """Whether an order in `status` is working (OPEN_STATUSES): by identity, where the set hashes a member."""
    return status is _SUBMITTED or status is _ACCEPTED or status is _PARTIALLY_FILLED


class InvalidTransition(Exception):
    """An order event arrived that the lifecycle does not allow: a bug, never a market outcome."""


def next_status(status: OrderStatus, event: object) -> OrderStatus:
    try:
        return TRANSITIONS[(status, type(event))]
    except KeyError:
        raise InvalidTransition(f"{type(event).__name__} not allowed for an order in {status.value}") from None


# acyclic: an order holds strings, numbers and its executions (ids to tuples of numbers), never anything that
# could lead back to it, so the cyclic garbage collector need not track it. The kernel keeps CLOSED_KEPT of
# them: tracked, each full pass of the collector's middle generation went through every order made since the
# one before (mypyc's native classes are tracked unless they say so).
@mypyc_attr(acyclic=True)
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
    # the fills applied that had an execution id: id -> (the venue's CumQty after it, or None where the
    # report did not say; its quantity; the commission booked for it)
    executions: dict[str, tuple[int | None, int, int]] = field(default_factory=dict)
    # the venue's CumQty up to which fills without an execution id (a reconciliation's) have booked the
    # order: every execution at or below it is in what is booked
    covered_qty: int = 0

    # Written out, not left to @dataclass: compiled by mypyc, the generated __init__ would run as Python
    # (Order.from_command 576 ns, against 344 written out); the fields and defaults are those declared above.
    def __init__(self, order_id: str, strategy_id: str, symbol: str, side: Side, order_type: OrderType,
                 quantity: int, price: int | None, trigger_price: int | None, time_in_force: TimeInForce,
                 reduce_only: bool, status: OrderStatus = OrderStatus.INITIALIZED, filled_qty: int = 0,
                 venue_order_id: str = "", uncertain: bool = False,
                 executions: dict[str, tuple[int | None, int, int]] | None = None, covered_qty: int = 0) -> None:
        self.order_id = order_id
        self.strategy_id = strategy_id
        self.symbol = symbol
        self.side = side
        self.order_type = order_type
        self.quantity = quantity
        self.price = price
        self.trigger_price = trigger_price
        self.time_in_force = time_in_force
        self.reduce_only = reduce_only
        self.status = status
        self.filled_qty = filled_qty
        self.venue_order_id = venue_order_id
        self.uncertain = uncertain
        self.executions = {} if executions is None else executions
        self.covered_qty = covered_qty

    @staticmethod
    def from_command(cmd: SubmitOrder) -> Order:
        # Order(...), not cls(...): compiled, a call of the class itself is the native constructor, where a
        # call of `cls` goes through Python's call of a type and its arguments' parsing
        return Order(cmd.order_id, cmd.strategy_id, cmd.symbol, cmd.side, cmd.order_type, cmd.quantity, cmd.price,
                     cmd.trigger_price, cmd.time_in_force, cmd.reduce_only)

    @property
    def leaves_qty(self) -> int:
        return self.quantity - self.filled_qty

    @property
    def is_open(self) -> bool:
        return _open(self.status)

    @property
    def unacknowledged(self) -> bool:
        """Sent to the venue, and neither acknowledged nor answered yet."""
        return self.status is _SUBMITTED

    def apply(self, event: OrderEvent) -> None:
        kind = type(event)  # messages are final classes: exact types, as the transition table has them
        self.status = _NEXT[self.status].get(kind) or next_status(self.status, event)  # which raises
        if kind is _FILL or kind is _PARTIAL_FILL:
            fill = cast(OrderFilled, event)
            # each field read once: a message's field is read through Python's attribute lookup
            qty, trade_id, cum_qty = fill.last_qty, fill.trade_id, fill.cum_qty
            self.filled_qty += qty
            if self.filled_qty > self.quantity:
                raise InvalidTransition(f"order {self.order_id} overfilled: {self.filled_qty} > {self.quantity}")
            if trade_id:
                self.executions[trade_id] = (cum_qty, qty, fill.commission)
            elif cum_qty is not None:
                self.covered_qty = max(self.covered_qty, cum_qty)
            # Reports may arrive out of order (a resend, a reconciliation racing a live report): the
            # quantities, not the report's kind, say whether anything is left. An order is filled once all
            # of it is, and partly filled until then.
            # A report that calls itself final while part of the order is unfilled leaves the order working
            # for the rest, until the venue says what became of it; a fill behind the order's cancel or
            # expiry leaves it closed.
            if self.filled_qty == self.quantity:
                self.status = _FILLED
            elif self.status is not _CANCELED and self.status is not _EXPIRED:
                self.status = _PARTIALLY_FILLED
        elif kind is _ACCEPTED_REPORT:
            self.venue_order_id = cast(OrderAccepted, event).venue_order_id
        elif kind is _REPLACED_REPORT:
            replaced = cast(OrderReplaced, event)
            self.quantity = replaced.quantity
            self.price = replaced.price
            self.trigger_price = replaced.trigger_price


def duplicate(order: Order, fill: Fill) -> str:
    """Why the order has booked this fill already ("" if it has not).

    A venue's executions divide the order's quantity among them: each covers the quantity from its CumQty
    less its LastQty up to its CumQty. An execution is booked once, by its id; one at or below the CumQty
    a reconciliation booked through is in what that booked. A fill without an execution id (from an order
    status: the venue's CumQty, nothing more) books what of the quantity up to its CumQty no fill covers
    yet, so reports that arrive in any order, repeated or resent, add up to the venue's CumQty."""
    trade_id, cum_qty = fill.trade_id, fill.cum_qty
    if trade_id:
        if trade_id in order.executions:
            return f"execution {trade_id} is booked already"
        if cum_qty is not None and cum_qty <= order.covered_qty:
            return (f"execution {trade_id} (CumQty {format_fixed(cum_qty)}) is within the CumQty "
                    f"{format_fixed(order.covered_qty)} a reconciliation booked")
        return ""
    if cum_qty is not None and _uncovered(order, cum_qty) <= 0:
        return f"CumQty {format_fixed(cum_qty)} is booked already"
    return ""


def booked(order: Order, fill: Fill) -> Fill:
    """The fill as the order books it: one without an execution id books what of the quantity up to its
    CumQty no fill covers yet, whatever its reporter counted on (reports on their way to the kernel when it
    asked the venue may have booked some of it since)."""
    if fill.trade_id or fill.cum_qty is None:
        return fill
    new = _uncovered(order, fill.cum_qty)
    return fill if new == fill.last_qty else msgspec.structs.replace(fill, last_qty=new)


def _uncovered(order: Order, cum_qty: int) -> int:
    """How much of the order's quantity up to `cum_qty` no booked fill covers. An execution whose CumQty
    was not reported counts as below it."""
    covered = order.covered_qty
    within = sum(qty for cum, qty, _ in order.executions.values() if cum is None or covered < cum <= cum_qty)
    return cum_qty - covered - within


def refusal(order: Order | None, report: OrderEvent) -> str:
    """Why the order's lifecycle does not allow this report of the venue's; "" if it does."""
    if order is None:
        return "no such order (or one closed before the kernel's newest closed orders, which it forgot)"
    if report.symbol != order.symbol:
        return f"symbol {report.symbol} is not the order's {order.symbol}"
    kind = type(report)
    if kind not in _NEXT[order.status]:
        return f"{kind.__name__} not allowed for an order in {order.status.value}"
    if kind is _FILL or kind is _PARTIAL_FILL:
        fill = cast(OrderFilled, report)
        if fill.side is not order.side:
            return f"fill side {fill.side.value} is not the order's {order.side.value}"
        qty, price = fill.last_qty, fill.last_price
        if qty <= 0 or price <= 0:
            return f"fill of {format_fixed(qty)} at {format_fixed(price)}: not a trade"
        limit = order.price if order.order_type is _LIMIT else None
        if limit is not None and (price > limit if order.side is _BUY else price < limit):
            return f"fill at {format_fixed(price)} beyond the order's limit {format_fixed(limit)}"
        if order.filled_qty + qty > order.quantity:
            return (f"fill of {format_fixed(qty)} beyond the order's {format_fixed(order.quantity)}"
                    f" ({format_fixed(order.filled_qty)} filled)")
    return ""




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
        if _open(order.status):
            self.open[order.order_id] = order
        elif _open(before) or before is _INITIALIZED:  # it closed now
            self.open.pop(order.order_id, None)
            self._closed(order)

    def _closed(self, order: Order) -> None:
        if order.status is _DENIED:
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
