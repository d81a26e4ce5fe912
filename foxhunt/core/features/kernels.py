"""The feature formulas (core/features/spec.py says what each is) as numba kernels over one symbol's state.

`step_nb` takes one event and writes its row; `batch_nb` is the same step over a whole range, one event
after another. Both run the same compiled step, with no fastmath, so a row is the same bits whichever form
computed it (tests/unit/test_features.py checks it at many cuts). The plain functions are the twins the
tests compare the compiled ones against.

An event is (ts, kind, v0, v1, v2, v3), with prices and sizes as the journal's integer nanos in float64:
- QUOTE: bid, ask, bid size, ask size;
- TRADE: price, size, aggressor (+1 buyer, -1 seller, 0 unknown), unused;
- BAR: close, high, low, volume.
"""

from __future__ import annotations

import functools
import math

from foxhunt.core.jit import compiled

QUOTE, TRADE, BAR = 0, 1, 2
DAY_NS = 86_400_000_000_000
TWO_PI = 2.0 * math.pi

# The state of one symbol: fixed slots, the parameters (the ring's length, which is the longest horizon + 1,
# the two decay weights, the horizons), then a ring of the last reference prices. The parameters live in
# the state so that a call passes one array less (the incremental form's cost is mostly its arguments).
ROWS, QUOTED, PRICE, VAR = 0, 1, 2, 3
SPREAD, IMBALANCE = 4, 5
LAST_BID, LAST_ASK, LAST_BID_SIZE, LAST_ASK_SIZE = 6, 7, 8, 9
OFI, DEPTH, FLOW, VOLUME, HEAD, HORIZONS = 10, 11, 12, 13, 14, 15
P_RING, P_ALPHA_VOL, P_ALPHA_FLOW, P_HORIZONS = 16, 17, 18, 19


def step_nb(state, ts, kind, v0, v1, v2, v3, out):
    """One event of the symbol whose `state` this is: update the state and write the event's row to `out`."""
    ring = int(state[P_RING])
    a_vol = state[P_ALPHA_VOL]
    a_flow = state[P_ALPHA_FLOW]
    horizons = int(state[HORIZONS])
    at = P_HORIZONS + horizons  # where the ring starts
    prev = state[PRICE]
    price = prev
    if kind == QUOTE:
        if v0 > 0.0 and v1 >= v0:
            price = (v0 + v1) * 0.5
            state[SPREAD] = (v1 - v0) / price * 1e4
        if v2 + v3 > 0.0:
            state[IMBALANCE] = (v2 - v3) / (v2 + v3)
            if state[QUOTED] > 0.0:
                e = 0.0
                if v0 >= state[LAST_BID]:
                    e += v2
                if v0 <= state[LAST_BID]:
                    e -= state[LAST_BID_SIZE]
                if v1 <= state[LAST_ASK]:
                    e -= v3
                if v1 >= state[LAST_ASK]:
                    e += state[LAST_ASK_SIZE]
                state[OFI] += a_flow * (e - state[OFI])
            state[DEPTH] += a_flow * ((v2 + v3) * 0.5 - state[DEPTH])
        state[LAST_BID] = v0
        state[LAST_ASK] = v1
        state[LAST_BID_SIZE] = v2
        state[LAST_ASK_SIZE] = v3
        state[QUOTED] = 1.0
    elif kind == TRADE:
        if state[QUOTED] == 0.0 and v0 > 0.0:
            price = v0
        if v2 != 0.0:
            state[FLOW] += a_flow * (v1 * v2 - state[FLOW])
            state[VOLUME] += a_flow * (v1 - state[VOLUME])
    elif v0 > 0.0:
        price = v0
    if price != prev and prev > 0.0:
        r = math.log(price / prev)
        state[VAR] += a_vol * (r * r - state[VAR])
    state[PRICE] = price
    head = int(state[HEAD])
    state[at + head] = price
    state[HEAD] = float((head + 1) % ring)
    rows = state[ROWS] + 1.0
    state[ROWS] = rows
    for j in range(horizons):
        h = int(state[P_HORIZONS + j])
        out[j] = 0.0
        if rows > h and price > 0.0:
            past = state[at + (head - h + ring) % ring]
            if past > 0.0:
                out[j] = math.log(price / past)
    out[horizons] = math.sqrt(state[VAR])
    out[horizons + 1] = state[SPREAD]
    out[horizons + 2] = state[IMBALANCE]
    out[horizons + 3] = state[OFI] / state[DEPTH] if state[DEPTH] > 0.0 else 0.0
    out[horizons + 4] = state[FLOW] / state[VOLUME] if state[VOLUME] > 0.0 else 0.0
    angle = (ts % DAY_NS) * (TWO_PI / DAY_NS)
    out[horizons + 5] = math.sin(angle)
    out[horizons + 6] = math.cos(angle)


def _batch(step):
    def batch_nb(state, ts, kind, values, out, prices):
        """`step` over every event of one symbol, in order: row i of `out` is event i's, and `prices[i]`
        the reference price after it (0.0 while there is none), which labels are computed from."""
        for i in range(ts.size):
            step(state, ts[i], kind[i], values[i, 0], values[i, 1], values[i, 2], values[i, 3], out[i])
            prices[i] = state[PRICE]

    return batch_nb


batch_py = _batch(step_nb)  # the twin, all Python

STEP_SIGNATURE = (
    "void(float64[::1], int64, int64, float64, float64, float64, float64, float64[::1])"
)
BATCH_SIGNATURE = (
    "void(float64[::1], int64[::1], int64[::1], float64[:, ::1], float64[:, ::1], float64[::1])"
)


@functools.cache
def kernels():
    """(step, batch) compiled, on first use; batch calls the same compiled step."""
    step = compiled(step_nb, STEP_SIGNATURE)
    return step, compiled(_batch(step), BATCH_SIGNATURE)
