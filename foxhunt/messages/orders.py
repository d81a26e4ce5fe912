"""Order commands and order events.

Commands are derived: the kernel decides them (a strategy asked, the pre-trade gate agreed). Events that
only a venue can know (accepted, rejected, canceled, replaced, filled, expired) are inputs; the kernel's
own verdicts (`OrderDenied`, `OrderSubmitted`) are derived.
"""

from __future__ import annotations

from foxhunt.messages.base import Derived, Enum, Input

# Closed orders the kernel remembers, the most recently closed (core/orders.py, `Orders`): enough for any late
# report (a fill racing a cancel, a cancel reject) to find its order, while memory stays flat however long the
# daemon runs. A report for an order forgotten since is refused as for an unknown order (Kernel._admit), and
# venue adapters remember the ids of a few more (adapters/venues/recent.py). Here because both sides read it.
CLOSED_KEPT = 10_000


class Side(Enum):
    BUY = "BUY"
    SELL = "SELL"


class OrderType(Enum):
    MARKET = "MARKET"
    LIMIT = "LIMIT"
    STOP = "STOP"


class TimeInForce(Enum):
    DAY = "DAY"
    GTC = "GTC"
    IOC = "IOC"
    FOK = "FOK"


# --- commands -------------------------------------------------------------------------------------


class SubmitOrder(Derived, frozen=True, kw_only=True):
    """A new order as a strategy or operator asked for it, before the pre-trade gate."""

    order_id: str
    strategy_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: int
    price: int | None = None
    trigger_price: int | None = None
    time_in_force: TimeInForce = TimeInForce.GTC
    reduce_only: bool = False
    # The strategy's estimate of its edge, for Kelly sizing: probability of a win, and the win per unit
    # risked (a loss is one unit). None: no estimate, the Kelly cap does not apply.
    edge_win_prob: float | None = None
    edge_payoff: float | None = None


class CancelOrder(Derived, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    reason: str = ""


class ReplaceOrder(Derived, frozen=True, kw_only=True):
    """Change quantity and/or prices of a working order; None keeps the current value."""

    order_id: str
    symbol: str
    quantity: int | None = None
    price: int | None = None
    trigger_price: int | None = None


# --- verdicts of the kernel (derived) ---------------------------------------------------------------


class OrderSubmitted(Derived, frozen=True, kw_only=True):
    """The command passed the pre-trade gate and is handed to the venue once the journal has it."""

    order_id: str
    symbol: str


class OrderDenied(Derived, frozen=True, kw_only=True):
    """The pre-trade gate refused a command; `reason` is a stable code, `detail` the values behind it.

    For a new order the order ends DENIED; a denied cancel or replace leaves the order as it was.
    """

    order_id: str
    symbol: str
    reason: str
    detail: str = ""


class DenialsRepeated(Derived, frozen=True, kw_only=True):
    """The denials a window held back (core/risk/repeats.py): the same strategy asked `repeats` more times
    for the same kind of request on the same symbol and side, and was denied for the same `reason`, in the
    window that `first_order_id`'s denial (journaled in full, with its request) opened at `since_ns` on the
    run's clock. The repeats' own requests and denials are not journaled; replay derives them again, and
    this summary with them. `request` is the command's kind; `side` is "" where the order is unknown."""

    strategy_id: str
    symbol: str
    request: str
    side: str
    reason: str
    repeats: int
    first_order_id: str
    last_order_id: str
    since_ns: int


class OrderReportRefused(Derived, frozen=True, kw_only=True):
    """A venue's report that the order's lifecycle does not allow: a second acknowledgement, a fill beyond
    the order's quantity or after its end, a report for an order the kernel does not have. The order stays
    as it was; a refused fill also halts trading, since the venue says it traded what the positions do not
    show, and an operator must reconcile them."""

    order_id: str
    symbol: str
    report: str  # the report's kind
    reason: str


class DuplicateFillIgnored(Derived, frozen=True, kw_only=True):
    """A venue's fill that the order has booked already, recorded and not booked again: an execution id the
    order has applied (a resend after a restart, with or without PossDupFlag, or a plain repeat), or an
    execution whose cumulative quantity a reconciliation has already booked (core/orders.py, `duplicate`).
    Nothing changes: not the order, not the position, not the trading state."""

    order_id: str
    symbol: str
    trade_id: str
    reason: str


class OrdersUncertain(Derived, frozen=True, kw_only=True):
    """The venue went down while these orders were working: what became of them there is unknown until it
    is back and has reconciled them (the reports it records, then VenueConnected). Meanwhile they count as
    working, at their full remaining quantity, and nothing new goes to the venue."""

    venue: str
    order_ids: list[str]
    reason: str


# --- reports from a venue (inputs) ------------------------------------------------------------------


class OrderAccepted(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    venue_order_id: str


class OrderRejected(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    reason: str


class OrderCanceled(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    reason: str = ""


class OrderCancelRejected(Input, frozen=True, kw_only=True):
    """The venue refused a cancel or replace; the order goes on as it was. `replace`: it was a replace
    (FIX CxlRejResponseTo(434)=2), so a cancel of the order still waits for its answer."""

    order_id: str
    symbol: str
    reason: str
    replace: bool = False


class OrderReplaced(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    quantity: int
    price: int | None = None
    trigger_price: int | None = None


class OrderExpired(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str


class _Fill(Input, frozen=True, kw_only=True):
    order_id: str
    symbol: str
    side: Side
    trade_id: str
    last_qty: int
    last_price: int
    leaves_qty: int
    commission: int = 0
    liquidity: str = "TAKER"
    # The venue's cumulative quantity of the order once this execution is counted (FIX CumQty(14), IB's
    # cumQty); None where the report did not say (journals from before it was recorded). A fill without a
    # `trade_id` is one the venue gave no execution id for (reconciliation from an order status): the
    # kernel books it by this quantity, as what raises the order's filled quantity to it.
    cum_qty: int | None = None


class OrderPartiallyFilled(_Fill, frozen=True, kw_only=True):
    """Some quantity traded and `leaves_qty` is still working."""


class OrderFilled(_Fill, frozen=True, kw_only=True):
    """The last fill of an order: `leaves_qty` is zero."""


class CommissionReported(Input, frozen=True, kw_only=True):
    """The commission of an execution, reported after its fill was journaled (IB sends its commission report
    on its own, and a reconciliation may book the execution before it comes): the kernel books what it
    adds to the commission the fill carried, once."""

    order_id: str
    symbol: str
    trade_id: str
    commission: int


Fill = OrderPartiallyFilled | OrderFilled

# What happens to one order, as the kernel's order path takes it: the gate's verdicts and the venue's reports.
OrderEvent = (
    OrderSubmitted | OrderDenied | OrderAccepted | OrderRejected | OrderCanceled | OrderCancelRejected
    | OrderReplaced | OrderExpired | OrderPartiallyFilled | OrderFilled
)
