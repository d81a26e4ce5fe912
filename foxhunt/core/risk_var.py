"""The portfolio gate: historical VaR and expected shortfall of the book after an order.

Every instrument's mark is sampled on one clock in event time (`var_sample_ms`), and the simple returns
between samples fill a ring of `var_window` scenarios per instrument. The book's P&L in each scenario
(its exposures at the last sample times each instrument's return in that scenario) is kept as one vector,
recomputed when a sample is taken or a fill changes a position, so checking an order costs one pass over
the window: add the order's exposure times its instrument's returns, and take the tail. VaR is the k-th
largest loss with k = ceil(n * (1 - confidence)) exactly (see foxhunt.risk), ES the mean of the k.

An order is denied when the book's VaR or ES after it would exceed its limit and the order adds to it (an
order that lowers them always passes); and, while the window holds too few scenarios for the confidence
to have a tail, any order that adds exposure is denied: a desk that set a VaR limit wants no trading it
cannot measure.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from foxhunt.core.jit import compiled


def var_es_nb(scenarios, returns, instrument, delta, used, k):
    """(VaR, ES) of the book before and after adding `delta` exposure to `instrument`, over the first
    `used` scenarios: VaR before, ES before, VaR after, ES after."""
    before = np.empty(used)
    after = np.empty(used)
    row = returns[instrument]
    for s in range(used):
        before[s] = -scenarios[s]
        after[s] = -(scenarios[s] + delta * row[s])
    before.sort()
    after.sort()
    es_before = 0.0
    es_after = 0.0
    for i in range(used - k, used):
        es_before += before[i]
        es_after += after[i]
    return before[used - k], es_before / k, after[used - k], es_after / k


_SIGNATURE = "UniTuple(float64, 4)(float64[::1], float64[:, ::1], int64, float64, int64, int64)"


class BookVar:
    def __init__(self, symbols: list[str], window: int, sample_ns: int, confidence: float) -> None:
        self.var_es = compiled(var_es_nb, _SIGNATURE)  # at start-up, when the engine is built
        self.index = {symbol: i for i, symbol in enumerate(symbols)}
        n = len(symbols)
        self.window = window
        self.sample_ns = sample_ns
        self.returns = np.zeros((n, window))
        self.marks = np.zeros(n)  # latest mark per instrument, price units
        self.sampled = np.zeros(n)  # mark at the last sample
        self.exposure = np.zeros(n)  # position times multiplier, instrument units
        self.scenarios = np.zeros(window)
        self.used = 0  # scenarios filled so far (up to window)
        self.head = 0
        self.next_sample = -1
        self.tail = Fraction(repr(confidence))
        self.k_by_used = [math.ceil(m * (1 - self.tail)) for m in range(window + 1)]

    def on_mark(self, symbol: str, price: float, ts: int) -> None:
        if ts >= self.next_sample:
            self._sample(ts)  # first: a sample is the marks as they stood at the boundary
        self.marks[self.index[symbol]] = price

    def _sample(self, ts: int) -> None:
        """Close the period: each instrument's return since the last sample (0 for one not yet priced)."""
        if (self.sampled > 0).any():
            have = self.sampled > 0
            column = np.where(have, self.marks / np.where(have, self.sampled, 1.0) - 1.0, 0.0)
            self.returns[:, self.head] = column
            self.head = (self.head + 1) % self.window
            self.used = min(self.used + 1, self.window)
        self.sampled = self.marks.copy()
        self.next_sample = ts - ts % self.sample_ns + self.sample_ns
        self._rebuild()

    def on_position(self, symbol: str, units: float) -> None:
        self.exposure[self.index[symbol]] = units
        self._rebuild()

    def _rebuild(self) -> None:
        self.scenarios = np.ascontiguousarray((self.exposure * self.sampled) @ self.returns)

    def check(self, symbol: str, delta_units: float) -> tuple[float, float, float, float, int] | None:
        """(VaR before, ES before, VaR after, ES after, k), or None while the window has no tail yet."""
        k = self.k_by_used[self.used]
        if k < 1:
            return None
        i = self.index[symbol]
        delta = delta_units * (self.sampled[i] or self.marks[i])
        return (*self.var_es(self.scenarios, self.returns, i, delta, self.used, k), k)
