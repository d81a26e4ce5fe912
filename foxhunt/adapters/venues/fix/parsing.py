"""FIX 4.4 <-> foxhunt messages: pure functions and lookup tables, no quickfix, no I/O.

Raw messages are `tag=value` fields separated by SOH (\\x01), copied out of quickfix inside its callback;
everything here works on those copies, so it is unit-tested on recorded raw messages.

Client order ids: a new order goes out with ClOrdID = foxhunt's order id; each cancel or replace needs a
fresh ClOrdID, which is the order id, `~` and a counter. So every execution report leads back to its
order by cutting the ClOrdID at `~` (FIX 4.4, OrigClOrdID(41) and ClOrdID(11) semantics).

Tags and enumerations are those of the FIX 4.4 specification (fixtrading.org, FIX 4.4 with Errata 20030618).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from foxhunt.adapters.venues.reconcile import Seen, State
from foxhunt.messages.base import Input
from foxhunt.messages.fixed_point import format_fixed, parse_fixed, within_int64
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)

SOH = "\x01"

# tags
MSG_TYPE, SEQ_NUM, TEXT, REF_SEQ_NUM = 35, 34, 58, 45
CL_ORD_ID, ORIG_CL_ORD_ID, ORDER_ID, EXEC_ID = 11, 41, 37, 17
SYMBOL, SIDE, ORDER_QTY, ORD_TYPE, PRICE, STOP_PX = 55, 54, 38, 40, 44, 99
TIME_IN_FORCE, TRANSACT_TIME, ACCOUNT = 59, 60, 1
EXEC_TYPE, ORD_STATUS, LEAVES_QTY, CUM_QTY, AVG_PX, LAST_QTY, LAST_PX = 150, 39, 151, 14, 6, 32, 31
COMMISSION, ORD_REJ_REASON, CXL_REJ_REASON, CXL_REJ_RESPONSE_TO = 12, 103, 102, 434
REF_TAG_ID, REF_MSG_TYPE, SESSION_REJECT_REASON, BUSINESS_REJECT_REASON = 371, 372, 373, 380
LAST_LIQUIDITY_IND = 851
MASS_STATUS_REQ_ID, MASS_STATUS_REQ_TYPE, TOT_NUM_REPORTS, LAST_RPT_REQUESTED = 584, 585, 911, 912
ALL_ORDERS = "7"  # MassStatusReqType(585): status for all orders
TO_REPLACE = "2"  # CxlRejResponseTo(434): the refused request was a cancel/replace (1: a cancel)

SIDES = {Side.BUY: "1", Side.SELL: "2"}
SIDES_IN = {v: k for k, v in SIDES.items()}
ORD_TYPES = {OrderType.MARKET: "1", OrderType.LIMIT: "2", OrderType.STOP: "3"}
TIME_IN_FORCES = {TimeInForce.DAY: "0", TimeInForce.GTC: "1", TimeInForce.IOC: "3", TimeInForce.FOK: "4"}
LIQUIDITY = {"1": "MAKER", "2": "TAKER"}  # LastLiquidityInd(851): 1 added, 2 removed liquidity

# ExecType(150) -> what it means for foxhunt: an event to build, or nothing (a pending state, a restatement)
EXEC_TYPES = {
    "0": "accepted", "F": "trade", "4": "canceled", "5": "replaced", "8": "rejected", "C": "expired",
    "I": "status", "A": None, "6": None, "E": None, "D": None, "3": None,
}

# what an OrdStatus(39) says of an order, for reconciliation (FIX 4.4, OrdStatus): New, Partially filled,
# Replaced, Pending cancel and Pending replace are acknowledged and working; Filled, Canceled, Expired and
# Rejected are ends; any other (Pending new, Done for day, Suspended, ...) is acted on by its quantities only
ORD_STATUSES: dict[str, State] = {
    "0": "working", "1": "working", "5": "working", "6": "working", "E": "working",
    "2": "filled", "4": "canceled", "C": "expired", "8": "rejected",
}

ORD_REJ_REASONS = {
    "0": "broker option", "1": "unknown symbol", "2": "exchange closed", "3": "order exceeds limit",
    "4": "too late to enter", "5": "unknown order", "6": "duplicate order", "11": "unsupported order characteristic",
    "13": "incorrect quantity", "15": "unknown account", "99": "other",
}
CXL_REJ_REASONS = {"0": "too late to cancel", "1": "unknown order", "2": "broker option",
                   "3": "already pending cancel or replace", "6": "duplicate ClOrdID", "99": "other"}
SESSION_REJECT_REASONS = {
    "0": "invalid tag number", "1": "required tag missing", "2": "tag not defined for this message type",
    "3": "undefined tag", "4": "tag specified without a value", "5": "value is incorrect (out of range)",
    "6": "incorrect data format for value", "9": "CompID problem", "10": "SendingTime accuracy problem",
    "11": "invalid MsgType", "13": "tag appears more than once", "99": "other",
}


class FixParseError(ValueError):
    """A raw message that is not well-formed FIX, or lacks what its type requires; the text says which."""


class Parsed(NamedTuple):
    """One inbound application message, reduced to what foxhunt needs."""

    msg_type: str
    fields: dict[int, str]


def split(raw: str) -> Parsed:
    """Fields of a raw message (first occurrence of each tag; the messages foxhunt reads have no repeating
    groups it needs). FixParseError for anything that is not `tag=value` fields with a MsgType."""
    fields: dict[int, str] = {}
    for part in raw.rstrip(SOH).split(SOH):
        tag, sep, value = part.partition("=")
        if not sep or not tag.isdigit():
            raise FixParseError(f"not a tag=value field: {part[:40]!r}")
        fields.setdefault(int(tag), value)
    if MSG_TYPE not in fields:
        raise FixParseError("no MsgType(35)")
    return Parsed(fields[MSG_TYPE], fields)


def order_id_of(cl_ord_id: str) -> str:
    return cl_ord_id.split("~", 1)[0]


def utc_timestamp(ts_ns: int) -> str:
    """UTCTimestamp with milliseconds, YYYYMMDD-HH:MM:SS.sss, from integer nanoseconds."""
    ms = ts_ns // 1_000_000
    return f"{_utc_second(ms // 1000)}.{ms % 1000:03d}"


@functools.lru_cache(maxsize=8)
def _utc_second(second: int) -> str:  # orders come in bursts within a second: formatted once
    return time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(second))


# --- outbound ------------------------------------------------------------------------------------


def new_order_single(cmd: SubmitOrder, account: str = "") -> list[tuple[int, str]]:
    body = [
        (CL_ORD_ID, cmd.order_id), (SYMBOL, cmd.symbol), (SIDE, SIDES[cmd.side]),
        (TRANSACT_TIME, utc_timestamp(cmd.ts_init)), (ORDER_QTY, format_fixed(cmd.quantity)),
        (ORD_TYPE, ORD_TYPES[cmd.order_type]), (TIME_IN_FORCE, TIME_IN_FORCES[cmd.time_in_force]),
    ]
    if cmd.price is not None:
        body.append((PRICE, format_fixed(cmd.price)))
    if cmd.trigger_price is not None:
        body.append((STOP_PX, format_fixed(cmd.trigger_price)))
    if account:
        body.append((ACCOUNT, account))
    return body


class Working(NamedTuple):
    """What a cancel or replace request must repeat of the order it refers to."""

    cl_ord_id: str  # the ClOrdID the venue knows the order by now
    side: Side
    quantity: int
    order_type: OrderType
    price: int | None
    trigger_price: int | None
    venue_order_id: str = ""  # OrderID(37) from the venue's acknowledgement; "" before it


def _order_id(venue_order_id: str) -> list[tuple[int, str]]:
    """OrderID(37), the venue's own id of the order, where it is known: many venues find an order by it
    more surely than by a ClOrdID (say one a restarted foxhunt no longer knows)."""
    return [(ORDER_ID, venue_order_id)] if venue_order_id else []


def cancel_request(cmd: CancelOrder, new_cl_ord_id: str, order: Working) -> list[tuple[int, str]]:
    return [
        (ORIG_CL_ORD_ID, order.cl_ord_id), (CL_ORD_ID, new_cl_ord_id), *_order_id(order.venue_order_id),
        (SYMBOL, cmd.symbol), (SIDE, SIDES[order.side]), (TRANSACT_TIME, utc_timestamp(cmd.ts_init)),
        (ORDER_QTY, format_fixed(order.quantity)),
    ]


def replace_request(cmd: ReplaceOrder, new_cl_ord_id: str, order: Working) -> list[tuple[int, str]]:
    price = cmd.price if cmd.price is not None else order.price
    trigger = cmd.trigger_price if cmd.trigger_price is not None else order.trigger_price
    body = [
        (ORIG_CL_ORD_ID, order.cl_ord_id), (CL_ORD_ID, new_cl_ord_id), *_order_id(order.venue_order_id),
        (SYMBOL, cmd.symbol), (SIDE, SIDES[order.side]), (TRANSACT_TIME, utc_timestamp(cmd.ts_init)),
        (ORDER_QTY, format_fixed(cmd.quantity if cmd.quantity is not None else order.quantity)),
        (ORD_TYPE, ORD_TYPES[order.order_type]),
    ]
    if price is not None:
        body.append((PRICE, format_fixed(price)))
    if trigger is not None:
        body.append((STOP_PX, format_fixed(trigger)))
    return body


def status_request(cl_ord_id: str, symbol: str, side: Side, venue_order_id: str = "") -> list[tuple[int, str]]:
    return [(CL_ORD_ID, cl_ord_id), *_order_id(venue_order_id), (SYMBOL, symbol), (SIDE, SIDES[side])]


def mass_status_request(req_id: str) -> list[tuple[int, str]]:
    """OrderMassStatusRequest(AF) for all orders; the answers are ExecutionReports (ExecType I) carrying
    MassStatusReqID(584), the last with LastRptRequested(912)=Y."""
    return [(MASS_STATUS_REQ_ID, req_id), (MASS_STATUS_REQ_TYPE, ALL_ORDERS)]


# --- inbound -------------------------------------------------------------------------------------


def _require(f: dict[int, str], *tags: int) -> None:
    missing = [t for t in tags if not f.get(t)]
    if missing:
        raise FixParseError(f"MsgType {f.get(MSG_TYPE)!r} lacks required tag(s) {', '.join(map(str, missing))}")


def _qty(f: dict[int, str], tag: int) -> int:
    try:
        return within_int64(parse_fixed(f[tag]), f"tag {tag}")
    except KeyError as e:
        raise FixParseError(f"tag {tag}: missing") from e
    except ValueError as e:
        raise FixParseError(f"tag {tag}: not a decimal foxhunt holds: {f.get(tag)!r} ({e})") from e


def _text(f: dict[int, str], code_tag: int, codes: dict[str, str]) -> str:
    parts = []
    if code_tag in f:
        parts.append(f"{codes.get(f[code_tag], 'code')} ({code_tag}={f[code_tag]})")
    if f.get(TEXT):
        parts.append(f[TEXT])
    return ": ".join(parts) or "no reason given"


def order_status(f: dict[int, str]) -> Seen:
    """What an order status (ExecType I) says of one of our orders, for reconciliation (reconcile.py)."""
    return Seen(
        state=ORD_STATUSES.get(f.get(ORD_STATUS, ""), "other"),
        venue_order_id=f.get(ORDER_ID, ""),
        quantity=_qty(f, ORDER_QTY) if ORDER_QTY in f else None,
        price=_qty(f, PRICE) if PRICE in f else None,
        cum_qty=_qty(f, CUM_QTY) if CUM_QTY in f else None,
        avg_price=_qty(f, AVG_PX) if AVG_PX in f else 0,
        text=f.get(TEXT, "rejected at the venue"),
    )


def execution_report(f: dict[int, str], ts: int) -> Input | None:
    """An ExecutionReport(8) as a foxhunt event; None for states foxhunt does not record (pending ones).
    ExecType I (order status) is for reconciliation: see `status_report`."""
    _require(f, CL_ORD_ID, EXEC_TYPE, SYMBOL)
    kind = EXEC_TYPES.get(f[EXEC_TYPE], "unknown")
    order_id, symbol = order_id_of(f[CL_ORD_ID]), f[SYMBOL]
    match kind:
        case "accepted":
            return OrderAccepted(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol,
                                 venue_order_id=f.get(ORDER_ID, ""))
        case "trade":
            _require(f, EXEC_ID, SIDE, LAST_QTY, LAST_PX, LEAVES_QTY)
            side = SIDES_IN.get(f[SIDE])
            if side is None:
                raise FixParseError(f"Side(54) {f[SIDE]!r} is neither 1 nor 2")
            leaves = _qty(f, LEAVES_QTY)
            cls = OrderFilled if leaves == 0 else OrderPartiallyFilled
            return cls(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol, side=side, trade_id=f[EXEC_ID],
                       last_qty=_qty(f, LAST_QTY), last_price=_qty(f, LAST_PX), leaves_qty=leaves,
                       commission=_qty(f, COMMISSION) if COMMISSION in f else 0,
                       liquidity=LIQUIDITY.get(f.get(LAST_LIQUIDITY_IND, ""), "TAKER"),
                       cum_qty=_qty(f, CUM_QTY) if CUM_QTY in f else None)
        case "canceled":
            return OrderCanceled(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol,
                                 reason=f.get(TEXT, "canceled by the venue"))
        case "replaced":
            _require(f, ORDER_QTY)
            return OrderReplaced(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol,
                                 quantity=_qty(f, ORDER_QTY), price=_qty(f, PRICE) if PRICE in f else None,
                                 trigger_price=_qty(f, STOP_PX) if STOP_PX in f else None)
        case "rejected":
            return OrderRejected(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol,
                                 reason=_text(f, ORD_REJ_REASON, ORD_REJ_REASONS))
        case "expired":
            return OrderExpired(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol)
        case None | "status":
            return None
    raise FixParseError(f"unknown ExecType(150) {f[EXEC_TYPE]!r}")


def cancel_reject(f: dict[int, str], ts: int, symbol_of: Callable[[str], str | None]) -> Input:
    """OrderCancelReject(9): the order goes on as it was. The message carries no symbol, so the caller
    says which symbol an order id has (None or "" for an order it does not know)."""
    _require(f, CL_ORD_ID)
    order_id = order_id_of(f.get(ORIG_CL_ORD_ID) or f[CL_ORD_ID])
    return OrderCancelRejected(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol_of(order_id) or "",
                               reason=_text(f, CXL_REJ_REASON, CXL_REJ_REASONS),
                               replace=f.get(CXL_REJ_RESPONSE_TO) == TO_REPLACE)


def session_reject_text(f: dict[int, str]) -> str:
    """Reject(3): why the counterparty's session layer refused one of our messages."""
    parts = [_text(f, SESSION_REJECT_REASON, SESSION_REJECT_REASONS)]
    if REF_TAG_ID in f:
        parts.append(f"tag {f[REF_TAG_ID]}")
    return ", ".join(parts)


def business_reject_text(f: dict[int, str]) -> str:
    return _text(f, BUSINESS_REJECT_REASON, {"0": "other", "1": "unknown ID", "2": "unknown security",
                                             "3": "unsupported message type", "4": "application not available",
                                             "5": "conditionally required field missing"})


def refused(msg_type: str, order_id: str, symbol: str, reason: str, ts: int) -> Input:
    """Our message of `msg_type` refused by the counterparty: a new order is rejected; a cancel or replace
    is a cancel reject (the order goes on)."""
    if msg_type == "D":
        return OrderRejected(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol, reason=reason)
    return OrderCancelRejected(ts_event=ts, ts_init=ts, order_id=order_id, symbol=symbol, reason=reason,
                               replace=msg_type == "G")


def render(fields: Iterable[tuple[int, str]]) -> str:
    """A readable form of fields, for logs: 35=8|11=...|."""
    return "|".join(f"{t}={v}" for t, v in fields)
