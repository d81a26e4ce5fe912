"""The per-order pre-trade checks: one numba kernel, its reason codes, and a plain-Python twin.

`check_order_nb` takes the engine's state as one int64 array (`engine_state`: the account's limits, float64,
layout `A_*`; one row per instrument with its limits and the state of its orders and position, layout
`L_*` and `S_*`; the account's throttle rings, layout `F_*`), where the instrument's row starts, and the
order and the rest of the state it meets as scalars; it writes the value and the limit behind a denial
into the account's `A_VALUE` and `A_LIMIT` and returns a reason code (0 passes). It never raises. One
array, because unboxing each costs the call about a tenth of a microsecond, and the engine calls it
through `jit.direct`, past numba's typing of every argument: the call is most of the check's cost.
Quantities and prices are nanos (see messages/base.py); an order's notional is compared in lots times
ticks against a limit converted to the same unit beforehand, so the comparison is exact at the limit;
exposures and credit, which add up different instruments, are float64 money.

`check_order_py` is the same rules written out plainly, for the tests to compare the kernel against.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba
import numpy as np

from foxhunt.core.jit import compiled, direct

# Reason codes: stable numbers, never reused. 0 passes.
OK = 0
REASONS = {
    1: "TRADING_HALTED",
    2: "RESTRICTED",
    3: "RESTRICTED_REDUCE_ONLY",
    4: "TRADING_REDUCING",
    5: "REDUCE_ONLY",
    6: "INVALID_LOT",
    7: "INVALID_TICK",
    8: "MIN_ORDER_QTY",
    9: "MAX_ORDER_QTY",
    10: "NO_REFERENCE_PRICE",
    11: "STALE_REFERENCE_PRICE",
    12: "MAX_ORDER_NOTIONAL",
    13: "PRICE_COLLAR_PCT",
    14: "PRICE_COLLAR_TICKS",
    15: "MAX_POSITION_LONG",
    16: "MAX_POSITION_SHORT",
    17: "MAX_OPEN_ORDERS",
    18: "MAX_OPEN_QTY",
    19: "MAX_GROSS_EXPOSURE",
    20: "MAX_NET_EXPOSURE",
    21: "CREDIT_LIMIT",
    22: "ORDER_THROTTLE",
    23: "MESSAGE_THROTTLE",
    24: "DUPLICATE_ORDER",
    25: "SELF_MATCH",
    26: "VOLATILITY_PAUSE",
    27: "PRICE_BAND_PAUSE",
}
CODES = {name: code for code, name in REASONS.items()}

UNLIMITED = np.iinfo(np.int64).max  # an integer limit that is off

# The instrument's limit row (int64).
L_LOT, L_TICK, L_MULT, L_MIN_QTY, L_MAX_QTY, L_MAX_NOTIONAL_LT = 0, 1, 2, 3, 4, 5
L_COLLAR_BPS, L_COLLAR_TICKS, L_MAX_LONG, L_MAX_SHORT, L_MAX_OPEN_ORDERS, L_MAX_OPEN_QTY = 6, 7, 8, 9, 10, 11
L_REF_MAX_AGE, L_RESTRICTED, L_PAUSED = 12, 13, 14  # L_PAUSED: a breaker's reason code (0: trading), not config
# ... followed by the instrument's state, kept in step by the engine (PreTradeGate.on_order, on_position):
# position, working buy and sell quantity and order count, our best resting buy and sell limit price (0: none).
S_POSITION, S_OPEN_BUY, S_OPEN_SELL, S_OPEN_ORDERS, S_OWN_BID, S_OWN_ASK = 15, 16, 17, 18, 19, 20
S_INSTRUMENT = 21  # the instrument's number (its place among the sorted symbols), part of the duplicate key
S_MARK = 22  # the instrument's last reference price, for the account's exposure (kept while its limits are on)
ROW_FIELDS = 23
# The account's flow state (int64): rings of recent order times, message times, and (key, time) of recent
# orders for the duplicate check, with their limits. A ring holds as many entries as its limit allows.
F_ORDER_LIMIT, F_ORDER_WINDOW, F_ORDER_HEAD = 0, 1, 2
F_MSG_LIMIT, F_MSG_WINDOW, F_MSG_HEAD = 3, 4, 5
F_DUP_WINDOW, F_DUP_HEAD, F_DUP_SLOTS = 6, 7, 8
F_SELF_MATCH = 9  # 1: self-match prevention on
F_HEADER = 10  # then: order ring [order limit], message ring [message limit], duplicate ring [2 * slots]
# The account's limit row (float64 money; inf is off), then where a denial writes what triggered it.
A_MAX_GROSS, A_MAX_NET, A_CREDIT = 0, 1, 2
A_VALUE, A_LIMIT = 3, 4
ACCOUNT_FIELDS = 5
# The engine's state: where the flow starts, the account row (float64, stored as its bits), the instruments'
# rows, then the flow (engine_state).
E_FLOW_AT, E_ACCOUNT = 0, 1
E_ROWS = E_ACCOUNT + ACCOUNT_FIELDS
# Restriction levels, and trading states, as the kernel sees them.
OPEN, NO_TRADE, REDUCE_ONLY_LIST = 0, 1, 2
ACTIVE, REDUCING, HALTED = 0, 1, 2
SCALE = 1_000_000_000


# The helpers the kernel calls: numba's lazy njit compiles them into the kernel that calls them (nothing
# happens at import), so the kernel's cache entry holds them and they need no cache of their own.
@numba.njit
def _ring_full_nb(flow, start, limit, window, head, now):
    """A ring of the last `limit` times is full when its oldest entry is still inside the window."""
    if limit == 0:
        return True
    oldest = flow[start + flow[head] % limit]
    return oldest != 0 and now - oldest < window


def engine_state(account: np.ndarray, rows: list[np.ndarray], flow: np.ndarray) -> np.ndarray:
    """The one array the check takes: the account row, the instruments' rows in order (row i starts at
    `E_ROWS + i * ROW_FIELDS`), the flow."""
    flow_at = E_ROWS + len(rows) * ROW_FIELDS
    engine = np.zeros(flow_at + flow.size, dtype=np.int64)
    engine[E_FLOW_AT] = flow_at
    engine[E_ACCOUNT:E_ROWS] = np.asarray(account, dtype=np.float64).view(np.int64)
    for i, row in enumerate(rows):
        engine[E_ROWS + i * ROW_FIELDS : E_ROWS + (i + 1) * ROW_FIELDS] = row
    engine[flow_at:] = flow
    return engine


def check_order_nb(
    engine, row_at, side, qty, total, price, has_price, reduce_only, ref, ref_age, less_buy, less_sell, less_orders,
    canceling, state, credit_used, value_price, now, terms, trigger,
):
    """`row_at`: where the instrument's row starts in `engine`. `qty`: the quantity the order adds to what
    is working; `total`: the order's whole quantity, which the order-size limits apply to (a replace's
    remaining quantity and its new total; a new order's are the same). `less_*`: working quantity and orders
    not to count (a replace is checked in place of its order). `canceling`: of the working quantity on the
    order's side, what is being canceled: it does not stand in the way of an order that reduces (an
    operator's flatten cancels the working orders and closes the position in one input). `credit_used`: the account's positions at
    market plus its working orders, money; `value_price`: the price the order is valued at for credit (its
    limit, or a market order's reference bounded by the collar). `terms`: the order's type and time in force
    as one nonzero number, or 0 for an order that the duplicate check skips (a replace).

    No sum or product can wrap: quantities and prices are int64 nanos that may reach int64's maximum, so
    every sum and product of them is held at +-UNLIMITED (`_add_nb`, `_mul_nb`, `_scaled_nb`), which keeps
    every comparison with a limit exact (an UNLIMITED limit is off)."""
    lim = engine[row_at : row_at + ROW_FIELDS]
    acct = out = engine[E_ACCOUNT:E_ROWS].view(np.float64)
    flow = engine[engine[E_FLOW_AT] :]
    position = lim[S_POSITION]
    open_buy, open_sell, open_orders = lim[S_OPEN_BUY] - less_buy, lim[S_OPEN_SELL] - less_sell, lim[S_OPEN_ORDERS] - less_orders
    # an order reduces the position when, with the working orders on its side, it cannot take it past flat
    if side > 0:
        reduces = position < 0 and _add_nb(open_buy - canceling, qty) <= -position
    else:
        reduces = position > 0 and _add_nb(open_sell - canceling, qty) <= position
    if state == HALTED:
        return 1
    if lim[L_RESTRICTED] == NO_TRADE:
        return 2
    if lim[L_PAUSED] != 0:  # the code of whichever breaker paused the instrument
        return lim[L_PAUSED]
    if lim[L_RESTRICTED] == REDUCE_ONLY_LIST and not reduces:
        return 3
    if state == REDUCING and not reduces:
        return 4
    if reduce_only != 0 and not reduces:
        return 5
    if qty <= 0 or qty % lim[L_LOT] != 0 or total % lim[L_LOT] != 0:
        out[A_VALUE], out[A_LIMIT] = (qty if qty <= 0 or qty % lim[L_LOT] != 0 else total), lim[L_LOT]
        return 6
    if has_price != 0 and (price <= 0 or price % lim[L_TICK] != 0):
        out[A_VALUE], out[A_LIMIT] = price, lim[L_TICK]
        return 7
    if total < lim[L_MIN_QTY]:
        out[A_VALUE], out[A_LIMIT] = total, lim[L_MIN_QTY]
        return 8
    if total > lim[L_MAX_QTY]:
        out[A_VALUE], out[A_LIMIT] = total, lim[L_MAX_QTY]
        return 9
    needs_ref = has_price == 0 or lim[L_COLLAR_BPS] != UNLIMITED or lim[L_COLLAR_TICKS] != UNLIMITED
    if needs_ref and ref <= 0:
        return 10
    if needs_ref and ref_age > lim[L_REF_MAX_AGE]:
        out[A_VALUE], out[A_LIMIT] = ref_age, lim[L_REF_MAX_AGE]
        return 11
    at = price if has_price != 0 else ref
    price_ticks = at // lim[L_TICK] + (1 if at % lim[L_TICK] != 0 else 0)  # a reference mid between ticks rounds up
    lots_ticks = _mul_nb(total // lim[L_LOT], price_ticks)
    if lots_ticks > lim[L_MAX_NOTIONAL_LT]:
        out[A_VALUE], out[A_LIMIT] = lots_ticks, lim[L_MAX_NOTIONAL_LT]
        return 12
    if has_price != 0 and ref > 0:
        away = abs(price - ref)
        # away * 10_000 > ref * bps, exactly: for an integer, away > x is away > floor(x)
        if lim[L_COLLAR_BPS] != UNLIMITED and away > _scaled_nb(ref, lim[L_COLLAR_BPS], 10_000):
            out[A_VALUE], out[A_LIMIT] = away, ref
            return 13
        if lim[L_COLLAR_TICKS] != UNLIMITED and away > _mul_nb(lim[L_COLLAR_TICKS], lim[L_TICK]):
            out[A_VALUE], out[A_LIMIT] = away, _mul_nb(lim[L_COLLAR_TICKS], lim[L_TICK])
            return 14
    # the position if every working order on the order's side filled, and the order too
    worst_long = _add_nb(_add_nb(position, open_buy), qty if side > 0 else 0)
    worst_short = _add_nb(_add_nb(position, -open_sell), -qty if side < 0 else 0)
    if not reduces:
        if side > 0 and worst_long > lim[L_MAX_LONG]:
            out[A_VALUE], out[A_LIMIT] = worst_long, lim[L_MAX_LONG]
            return 15
        if side < 0 and -worst_short > lim[L_MAX_SHORT]:
            out[A_VALUE], out[A_LIMIT] = -worst_short, lim[L_MAX_SHORT]
            return 16
    if open_orders + 1 > lim[L_MAX_OPEN_ORDERS]:
        out[A_VALUE], out[A_LIMIT] = open_orders + 1, lim[L_MAX_OPEN_ORDERS]
        return 17
    open_qty = _add_nb(_add_nb(open_buy, open_sell), qty)
    if open_qty > lim[L_MAX_OPEN_QTY]:
        out[A_VALUE], out[A_LIMIT] = open_qty, lim[L_MAX_OPEN_QTY]
        return 18
    if not reduces:
        code = _check_account_nb(engine, row_at, worst_long, worst_short, ref if ref > 0 else at, acct, out)
        if code != 0:
            return code
        value = (qty / SCALE) * (value_price / SCALE) * lim[L_MULT]
        if credit_used + value > acct[A_CREDIT]:
            out[A_VALUE], out[A_LIMIT] = credit_used + value, acct[A_CREDIT]
            return 21
    own_bid, own_ask = (lim[S_OWN_BID], lim[S_OWN_ASK]) if flow[F_SELF_MATCH] != 0 else (0, 0)
    key = 0
    if terms != 0 and flow[F_DUP_SLOTS] > 0:
        key = _duplicate_key_nb(lim[S_INSTRUMENT], side, terms, total, price, trigger)
    code = _check_flow_nb(flow, side, has_price, price, now, key, own_bid, own_ask, out)
    if code == 0:
        _record_nb(flow, now, key)
    return code


@numba.njit
def _check_account_nb(engine, row_at, worst_long, worst_short, mark, acct, out):
    """The account's gross and net exposure if every working order filled, the order too: each instrument's
    worst long (position plus working buys) and worst short (position less working sells) at its mark;
    gross adds up the larger of the two in size, net is the larger in size of the two sums. The ordered
    instrument's worst cases and mark are the caller's (the order's own reference price)."""
    if acct[A_MAX_GROSS] == np.inf and acct[A_MAX_NET] == np.inf:
        return 0
    gross = net_long = net_short = 0.0
    for at in range(E_ROWS, engine[E_FLOW_AT], ROW_FIELDS):
        if at == row_at:
            high, low, price, mult = worst_long, worst_short, mark, engine[at + L_MULT]
        else:
            position = engine[at + S_POSITION]
            high = _add_nb(position, engine[at + S_OPEN_BUY])
            low = _add_nb(position, -engine[at + S_OPEN_SELL])
            price, mult = engine[at + S_MARK], engine[at + L_MULT]
        long_value = (high / SCALE) * (price / SCALE) * mult
        short_value = (low / SCALE) * (price / SCALE) * mult
        gross += max(abs(long_value), abs(short_value))
        net_long += long_value
        net_short += short_value
    if gross > acct[A_MAX_GROSS]:
        out[A_VALUE], out[A_LIMIT] = gross, acct[A_MAX_GROSS]
        return 19
    net = max(abs(net_long), abs(net_short))
    if net > acct[A_MAX_NET]:
        out[A_VALUE], out[A_LIMIT] = net, acct[A_MAX_NET]
        return 20
    return 0


@numba.njit
def _add_nb(a, b):
    """a + b held within +-UNLIMITED (int64's maximum): a sum past it compares as past every limit."""
    if b > 0 and a > UNLIMITED - b:
        return UNLIMITED
    if b < 0 and a < -UNLIMITED - b:
        return -UNLIMITED
    return a + b


@numba.njit
def _mul_nb(a, b):
    """a * b for a, b >= 0, held at UNLIMITED."""
    if a != 0 and b > UNLIMITED // a:
        return UNLIMITED
    return a * b


@numba.njit
def _scaled_nb(x, num, den):
    """floor(x * num / den) for x, num >= 0 and 0 < num, den <= 10**9, held at UNLIMITED, computed without
    the product x * num (which may not fit): floor(x / den) * num + floor((x mod den) * num / den)."""
    return _add_nb(_mul_nb(x // den, num), (x % den) * num // den)


@numba.njit
def _duplicate_key_nb(instrument, side, terms, qty, price, trigger):
    """What makes two orders the same, as one int64: FNV-1a (Fowler, Noll, Vo) over 64-bit words, wrapping.
    Integers only: replay must compute the same key as live trading did. 0 means no key."""
    h = -3750763034362895579  # the 64-bit FNV offset basis 0xcbf29ce484222325, as int64
    for word in (instrument, side, terms, qty, price, trigger):
        h = (h ^ word) * 1099511628211  # the 64-bit FNV prime
    return h if h != 0 else 1


@numba.njit
def _check_flow_nb(flow, side, has_price, price, now, key, own_bid, own_ask, out):
    orders_at = F_HEADER
    msgs_at = orders_at + flow[F_ORDER_LIMIT] if flow[F_ORDER_LIMIT] != UNLIMITED else orders_at
    dups_at = msgs_at + flow[F_MSG_LIMIT] if flow[F_MSG_LIMIT] != UNLIMITED else msgs_at
    if flow[F_ORDER_LIMIT] != UNLIMITED and _ring_full_nb(
        flow, orders_at, flow[F_ORDER_LIMIT], flow[F_ORDER_WINDOW], F_ORDER_HEAD, now
    ):
        out[A_VALUE], out[A_LIMIT] = flow[F_ORDER_LIMIT] + 1, flow[F_ORDER_LIMIT]
        return 22
    if flow[F_MSG_LIMIT] != UNLIMITED and _ring_full_nb(flow, msgs_at, flow[F_MSG_LIMIT], flow[F_MSG_WINDOW], F_MSG_HEAD, now):
        out[A_VALUE], out[A_LIMIT] = flow[F_MSG_LIMIT] + 1, flow[F_MSG_LIMIT]
        return 23
    # newest first, up to the first order older than the window: the ring holds orders in input order
    slots = flow[F_DUP_SLOTS] if key != 0 else 0
    at = dups_at + 2 * ((flow[F_DUP_HEAD] - 1) % slots) if slots else dups_at
    for _ in range(slots):
        if flow[at + 1] == 0 or now - flow[at + 1] >= flow[F_DUP_WINDOW]:
            break
        if flow[at] == key:
            out[A_VALUE], out[A_LIMIT] = now - flow[at + 1], flow[F_DUP_WINDOW]
            return 24
        at = at - 2 if at > dups_at else dups_at + 2 * (slots - 1)
    # self-match: a buy that would trade with our own resting sell, or a sell with our own resting buy
    if side > 0 and own_ask > 0 and (has_price == 0 or price >= own_ask):
        out[A_VALUE], out[A_LIMIT] = price, own_ask
        return 25
    if side < 0 and own_bid > 0 and (has_price == 0 or price <= own_bid):
        out[A_VALUE], out[A_LIMIT] = price, own_bid
        return 25
    return 0


@numba.njit
def _record_nb(flow, now, key):
    """Note an order that passed: in the order ring, the message ring and the duplicate ring."""
    at = F_HEADER
    if flow[F_ORDER_LIMIT] != UNLIMITED:
        if flow[F_ORDER_LIMIT] > 0:
            flow[at + flow[F_ORDER_HEAD] % flow[F_ORDER_LIMIT]] = now
            flow[F_ORDER_HEAD] += 1
        at += flow[F_ORDER_LIMIT]
    record_message_nb(flow, now)
    if flow[F_MSG_LIMIT] != UNLIMITED:
        at += flow[F_MSG_LIMIT]
    if flow[F_DUP_SLOTS] > 0 and key != 0:
        slot = at + 2 * (flow[F_DUP_HEAD] % flow[F_DUP_SLOTS])
        flow[slot], flow[slot + 1] = key, now
        flow[F_DUP_HEAD] += 1


@numba.njit
def record_message_nb(flow, now):
    """Note a message to a venue (an order that passed, or a cancel) in the message ring."""
    limit = flow[F_MSG_LIMIT]
    if limit != UNLIMITED and limit > 0:
        start = F_HEADER + (flow[F_ORDER_LIMIT] if flow[F_ORDER_LIMIT] != UNLIMITED else 0)
        flow[start + flow[F_MSG_HEAD] % limit] = now
        flow[F_MSG_HEAD] += 1


SIGNATURE = (
    "int64(int64[::1], int64, int64, int64, int64, int64, int64, int64, int64, int64, int64, int64, int64,"
    " int64, int64, float64, int64, int64, int64, int64)"
)
def kernels() -> SimpleNamespace:
    """The compiled check (core/jit.py), compiled on first call, which building the risk engine makes at
    start-up."""
    return SimpleNamespace(
        check_order_nb=direct(compiled(check_order_nb, SIGNATURE)),
        record_message_nb=compiled(record_message_nb.py_func, "void(int64[::1], int64)"),
    )


def _held(x: int) -> int:
    """A sum or product as the kernel keeps it: within +-UNLIMITED."""
    return max(-UNLIMITED, min(UNLIMITED, x))


def check_order_py(limits: dict, account: dict, order: dict, state: dict) -> tuple[str, tuple]:
    """The same rules, written for reading: returns (reason name or "OK", (value, limit)). `order` may give
    a `total` (a replace's new quantity; else `qty`), a `value_price` (else its price or the reference) and
    the quantity `canceling` on its side;
    `state["book"]` every instrument in the engine's order: None for the order's own, the others as (position,
    working buys, working sells, mark, multiplier)."""
    qty, side, pos = order["qty"], order["side"], state["position"]
    total = order.get("total", qty)
    buys, sells, canceling = state["open_buy"], state["open_sell"], order.get("canceling", 0)
    reduces = ((pos < 0 and side > 0 and _held(buys - canceling + qty) <= -pos)
               or (pos > 0 and side < 0 and _held(sells - canceling + qty) <= pos))
    price = order.get("price")
    ref, unlimited = state["ref"], UNLIMITED
    rules = [
        ("TRADING_HALTED", lambda: state["trading"] == "HALTED", ()),
        ("RESTRICTED", lambda: limits["restricted"] == "no_trade", ()),
        ("VOLATILITY_PAUSE", lambda: limits.get("paused", 0) == 26, ()),
        ("PRICE_BAND_PAUSE", lambda: limits.get("paused", 0) == 27, ()),
        ("RESTRICTED_REDUCE_ONLY", lambda: limits["restricted"] == "reduce_only" and not reduces, ()),
        ("TRADING_REDUCING", lambda: state["trading"] == "REDUCING" and not reduces, ()),
        ("REDUCE_ONLY", lambda: order["reduce_only"] and not reduces, ()),
    ]
    for name, failed, detail in rules:
        if failed():
            return name, detail
    if qty <= 0 or qty % limits["lot"]:
        return "INVALID_LOT", (qty, limits["lot"])
    if total % limits["lot"]:
        return "INVALID_LOT", (total, limits["lot"])
    if price is not None and (price <= 0 or price % limits["tick"]):
        return "INVALID_TICK", (price, limits["tick"])
    if total < limits["min_qty"]:
        return "MIN_ORDER_QTY", (total, limits["min_qty"])
    if total > limits["max_qty"]:
        return "MAX_ORDER_QTY", (total, limits["max_qty"])
    collars = limits["collar_bps"] != unlimited or limits["collar_ticks"] != unlimited
    if (price is None or collars) and ref <= 0:
        return "NO_REFERENCE_PRICE", ()
    if (price is None or collars) and state["ref_age"] > limits["ref_max_age"]:
        return "STALE_REFERENCE_PRICE", (state["ref_age"], limits["ref_max_age"])
    at = price if price is not None else ref
    lots_ticks = _held((total // limits["lot"]) * -(-at // limits["tick"]))  # whole ticks, a mid rounded up
    if limits["max_notional_lt"] != unlimited and lots_ticks > limits["max_notional_lt"]:
        return "MAX_ORDER_NOTIONAL", (lots_ticks, limits["max_notional_lt"])
    if price is not None and ref > 0:
        away = abs(price - ref)
        if limits["collar_bps"] != unlimited and away * 10_000 > ref * limits["collar_bps"]:
            return "PRICE_COLLAR_PCT", (away, ref)
        if limits["collar_ticks"] != unlimited and away > limits["collar_ticks"] * limits["tick"]:
            return "PRICE_COLLAR_TICKS", (away, _held(limits["collar_ticks"] * limits["tick"]))
    worst_long = _held(pos + buys + (qty if side > 0 else 0))
    worst_short = _held(pos - sells - (qty if side < 0 else 0))
    if not reduces:
        if side > 0 and limits["max_long"] != unlimited and worst_long > limits["max_long"]:
            return "MAX_POSITION_LONG", (worst_long, limits["max_long"])
        if side < 0 and limits["max_short"] != unlimited and -worst_short > limits["max_short"]:
            return "MAX_POSITION_SHORT", (-worst_short, limits["max_short"])
    if limits["max_open_orders"] != unlimited and state["open_orders"] + 1 > limits["max_open_orders"]:
        return "MAX_OPEN_ORDERS", (state["open_orders"] + 1, limits["max_open_orders"])
    if limits["max_open_qty"] != unlimited and buys + sells + qty > limits["max_open_qty"]:
        return "MAX_OPEN_QTY", (_held(buys + sells + qty), limits["max_open_qty"])
    if not reduces:
        own = (worst_long, worst_short, ref if ref > 0 else at, limits["mult"])
        books = [own if other is None else (_held(other[0] + other[1]), _held(other[0] - other[2]), *other[3:])
                 for other in state.get("book", [None])]
        longs = [(high / SCALE) * (mark / SCALE) * mult for high, _, mark, mult in books]
        shorts = [(low / SCALE) * (mark / SCALE) * mult for _, low, mark, mult in books]
        gross = 0.0
        for long_value, short_value in zip(longs, shorts):  # one at a time, in the kernel's order
            gross += max(abs(long_value), abs(short_value))
        if gross > account["max_gross"]:
            return "MAX_GROSS_EXPOSURE", (gross, account["max_gross"])
        net = max(abs(_sum(longs)), abs(_sum(shorts)))
        if net > account["max_net"]:
            return "MAX_NET_EXPOSURE", (net, account["max_net"])
        value = (qty / SCALE) * (order.get("value_price", at) / SCALE) * limits["mult"]
        if state["credit_used"] + value > account["credit"]:
            return "CREDIT_LIMIT", (state["credit_used"] + value, account["credit"])
    return "OK", ()


def _sum(values: list[float]) -> float:
    total = 0.0
    for v in values:  # in order, from 0.0: as the kernel adds
        total += v
    return total


class FlowPy:
    """The flow checks (throttles, duplicates, self-match) written for reading, with plain lists of
    times: the twin the tests compare the kernel's rings against."""

    def __init__(self, order_limit, order_window, msg_limit, msg_window, dup_window, dup_slots) -> None:
        self.order_limit, self.order_window = order_limit, order_window
        self.msg_limit, self.msg_window = msg_limit, msg_window
        self.dup_window, self.dup_slots = dup_window, dup_slots
        self.orders: list[int] = []
        self.messages: list[int] = []
        self.recent: list[tuple[object, int]] = []  # (key, time), newest last

    @staticmethod
    def _busy(times: list[int], limit: int, window: int, now: int) -> bool:
        """The last `limit` times all fall inside the window (a limit of 0 allows nothing)."""
        return limit == 0 or (len(times) >= limit and all(now - t < window for t in times[-limit:]))

    def check(self, side: int, price: int | None, now: int, key: object, own_bid: int, own_ask: int) -> str:
        if self.order_limit is not None and self._busy(self.orders, self.order_limit, self.order_window, now):
            return "ORDER_THROTTLE"
        if self.msg_limit is not None and self._busy(self.messages, self.msg_limit, self.msg_window, now):
            return "MESSAGE_THROTTLE"
        if any(k == key and now - t < self.dup_window for k, t in self.recent[-self.dup_slots:] if self.dup_slots):
            return "DUPLICATE_ORDER"
        if side > 0 and own_ask > 0 and (price is None or price >= own_ask):
            return "SELF_MATCH"
        if side < 0 and own_bid > 0 and (price is None or price <= own_bid):
            return "SELF_MATCH"
        self.orders.append(now)
        self.messages.append(now)
        self.recent.append((key, now))
        return "OK"

    def cancel(self, now: int) -> None:
        self.messages.append(now)
