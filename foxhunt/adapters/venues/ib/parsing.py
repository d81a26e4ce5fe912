"""Interactive Brokers <-> foxhunt messages: pure functions and lookup tables over ib_async's objects.

Orders carry foxhunt's order id in IB's `orderRef`, which TWS echoes in open orders and executions, so a
restarted foxhunt finds its orders again. Quantities and prices cross as floats in IB's API; they are
turned into foxhunt's fixed-point integers by their decimal text, so 1.1 stays 1.100000000.

Error codes are those of the TWS API documentation ("Message Codes"): which mean an order was refused,
which are about the connection, which are only information.
"""

from __future__ import annotations

from decimal import Decimal

from ib_async import Contract, Forex, Future, LimitOrder, MarketOrder, Order, Stock, StopOrder

from foxhunt.messages.base import format_fixed, parse_fixed
from foxhunt.messages.fixed_point import within_int64
from foxhunt.messages.market import Instrument
from foxhunt.messages.orders import OrderType, Side, SubmitOrder, TimeInForce

ACTIONS = {Side.BUY: "BUY", Side.SELL: "SELL"}
SIDES = {"BOT": Side.BUY, "SLD": Side.SELL, "BUY": Side.BUY, "SELL": Side.SELL}
TIME_IN_FORCES = {TimeInForce.DAY: "DAY", TimeInForce.GTC: "GTC", TimeInForce.IOC: "IOC", TimeInForce.FOK: "FOK"}

# order statuses (IB's OrderStatus.status) -> what foxhunt records
ACCEPTED_STATUSES = frozenset({"PreSubmitted", "Submitted"})
CANCELED_STATUSES = frozenset({"Cancelled", "ApiCancelled"})

# TWS error codes, as the TWS API documentation's "Message Codes" table gives them
# (interactivebrokers.github.io/tws-api/message_codes.html). What an error says of the order it names:
# - it ended: 201 "Order rejected - reason:", 202 "Order Canceled - reason:" (the orderStatus says it too);
# - a cancel was refused, the order goes on: 161 "Cancel attempted when order is not in a cancellable
#   state", 10147 "OrderId ... that needs to be cancelled is not found", 10148 "OrderId ... that needs to be
#   cancelled cannot be cancelled, state:";
# - an order or its modification was refused: the codes below (103 "Duplicate order ID", 104 "Can't modify
#   a filled order", 105 "Order being modified does not match original order", 110 "The price does not
#   conform to the minimum price variation", 134 "Modify order failed", 135 "Can't find order with ID", ...).
#   For an order IB has not acknowledged they reject it; for one IB works, only its modification failed.
# Every other code names no end of the order: an order is canceled only when IB says so (202, or its own
# order status), never because ib_async took an error for an end (it marks the order Cancelled on any
# error it does not count as a warning).
ENDING_CODES = {201: "rejected", 202: "canceled"}
ORDER_REJECT_CODES = frozenset({103, 104, 105, 106, 107, 109, 110, 111, 113, 116, 117, 118, 119, 120, 121, 122,
                                123, 124, 125, 126, 129, 131, 132, 133, 134, 135, 136, 137, 140, 141, 146, 147,
                                148, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 163, 164, 165, 166,
                                167, 168, 200, 203, 382, 383, 387, 388, 434, 435, 436, 437, 438})
CANCEL_REJECT_CODES = frozenset({161, 10147, 10148})
# ... the connection: lost, restored with data lost, restored with data kept
CONNECTION_LOST, RESTORED_DATA_LOST, RESTORED_DATA_KEPT = 1100, 1101, 1102
CONNECTION_CODES = frozenset({502, 504, 1100, 1101, 1102, 1300, 2110})
# ... information only: market data farm connected or broken and the like
WARNING_CODES = frozenset(range(2100, 2200)) - {2110}


def error_kind(code: int) -> str:
    """'ends_order', 'cancel_reject', 'reject', 'connection', 'warning' or 'other' for a TWS error code."""
    if code in ENDING_CODES:
        return "ends_order"
    if code in CANCEL_REJECT_CODES:
        return "cancel_reject"
    if code in ORDER_REJECT_CODES:
        return "reject"
    if code in CONNECTION_CODES:
        return "connection"
    if code in WARNING_CODES:
        return "warning"
    return "other"


def order_error(code: int, acknowledged: bool, modifying: bool) -> str:
    """What an error about one order means for it: 'rejected' or 'canceled' (it ended), 'cancel_refused',
    'modify_refused', or 'none' (the order goes on as it was)."""
    kind = error_kind(code)
    if kind == "ends_order":
        return ENDING_CODES[code]
    if kind == "cancel_reject":
        return "cancel_refused"
    if kind == "reject":
        if not acknowledged:
            return "rejected"
        return "modify_refused" if modifying else "none"
    return "none"


def contract(instrument: Instrument, sec_type: str, exchange: str, expiry: str = "") -> Contract:
    """The IB contract of a foxhunt instrument: CASH (a six-letter pair), STK or FUT."""
    symbol = instrument.symbol
    match sec_type:
        case "CASH":
            return Forex(symbol, exchange=exchange or "IDEALPRO")
        case "STK":
            return Stock(symbol, exchange or "SMART", instrument.currency)
        case "FUT":
            return Future(symbol, expiry, exchange, currency=instrument.currency)
    raise ValueError(f"instrument {symbol}: unsupported security type {sec_type!r}; known: CASH, STK, FUT")


def order(cmd: SubmitOrder, account: str = "") -> Order:
    qty = float(format_fixed(cmd.quantity))
    action = ACTIONS[cmd.side]
    match cmd.order_type:
        case OrderType.MARKET:
            o = MarketOrder(action, qty)
        case OrderType.LIMIT:
            o = LimitOrder(action, qty, float(format_fixed(cmd.price)))
        case OrderType.STOP:
            o = StopOrder(action, qty, float(format_fixed(cmd.trigger_price)))
    o.tif = TIME_IN_FORCES[cmd.time_in_force]
    o.orderRef = cmd.order_id
    if account:
        o.account = account
    return o


NANO = Decimal("0.000000001")


def fixed(value: float | int | str) -> int:
    """An IB float as foxhunt's fixed point, by its shortest decimal text (repr), so 1.1 is 1.1 exactly;
    digits beyond the ninth (a float sum's noise, 0.30000000000000004) are rounded half to even. NaN, an
    infinity or a value beyond what foxhunt holds (1e308) raises ValueError or ArithmeticError."""
    if isinstance(value, str):
        return within_int64(parse_fixed(value), value)
    return within_int64(parse_fixed(format(Decimal(repr(float(value))).quantize(NANO), "f")), repr(value))


# Messages from TWS as ib_async's decoder reads them (ib_async 2.1.0, decoder.py, at server version 176),
# by message id: the name of the wrapper method each reaches, and whether it can carry money (an order's
# status, an execution, its commission, an order as IB works it). One of these that cannot be read is a
# report that may have vanished: trading tightens as `on_rejected_execution` says.
MESSAGE_NAMES = {1: "tickPrice", 2: "tickSize", 3: "orderStatus", 4: "error", 5: "openOrder", 9: "nextValidId",
                 10: "contractDetails", 11: "execDetails", 49: "currentTime", 59: "commissionReport"}
CARRIES_MONEY = frozenset({3, 5, 11, 59})
# orderStatus's fields after its id, as the decoder types them; its handler swallows what it cannot read and
# drops a missing field without a word (it zips the fields with these types), so they are checked first
ORDER_STATUS_TYPES = (int, str, float, float, float, int, int, float, int, str, float)


def message_name(fields: list[str]) -> str:
    try:
        return MESSAGE_NAMES.get(int(fields[0]), f"message {fields[0]}")
    except (ValueError, IndexError):
        return "message without an id"


def unreadable_order_status(fields: list[str]) -> str:
    """Why an orderStatus message (id 3) cannot be read as the decoder would read it; "" if it can."""
    values = fields[1:]
    if len(values) < len(ORDER_STATUS_TYPES):
        return f"{len(values)} fields, {len(ORDER_STATUS_TYPES)} expected"
    for i, (kind, text) in enumerate(zip(ORDER_STATUS_TYPES, values, strict=False)):
        if kind is str:
            continue
        try:
            kind(text or 0)
        except ValueError:
            return f"field {i + 1} is {text[:40]!r}, not {'a whole number' if kind is int else 'a number'}"
    return ""
