"""The portfolio gate: historical VaR and expected shortfall of the book after an order.

Every instrument's mark is sampled on one clock in event time (`var_sample_ms`), and the simple returns
between samples fill a ring of `var_window` scenarios per instrument. The book's P&L in each scenario
(its exposures at the last sample times each instrument's return in that scenario) is kept as one vector,
recomputed when a sample is taken or a fill changes a position, and so is the book's own VaR and ES
(cached until then); checking an order costs one pass over the window: add the order's exposure times
its instrument's returns, and select the tail (a partition, not a sort). VaR is the k-th largest loss
with k = ceil(n * (1 - confidence)) exactly (see foxhunt.risk), ES the mean of the k.

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
    """(VaR, ES) of the book with `delta` exposure added to `instrument` (0.0: the book as it is), over
    the first `used` scenarios. The k largest losses are selected by a partition, then summed in
    ascending order, as a sort would have them."""
    losses = np.empty(used)
    row = returns[instrument]
    for s in range(used):
        losses[s] = -(scenarios[s] + delta * row[s])
    tail = np.sort(np.partition(losses, used - k)[used - k :])
    es = 0.0
    for i in range(k):
        es += tail[i]
    return tail[0], es / k


_SIGNATURE = "UniTuple(float64, 2)(float64[::1], float64[:, ::1], int64, float64, int64, int64)"


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
        self._before: tuple[float, float] | None = None  # the book's own (VaR, ES), until it changes

    def reconfigured(self, window: int, sample_ns: int, confidence: float) -> BookVar:
        """The same book under new settings, from the input that changes them: a new confidence applies to
        the scenarios held; a new window keeps the newest scenarios it has room for; a new sampling clock
        starts the window afresh (returns over another interval are other scenarios)."""
        if (window, sample_ns, confidence) == (self.window, self.sample_ns, float(self.tail)):
            return self
        new = BookVar(list(self.index), window, sample_ns, confidence)
        new.marks, new.sampled, new.exposure = self.marks.copy(), self.sampled.copy(), self.exposure.copy()
        if sample_ns == self.sample_ns:
            kept = min(self.used, window)
            newest = [(self.head - kept + i) % self.window for i in range(kept)]  # oldest first
            new.returns[:, :kept] = self.returns[:, newest]
            new.used, new.head = kept, kept % window
            new.next_sample = self.next_sample
        new._rebuild()
        return new

    def __getstate__(self) -> dict:  # a kernel snapshot: the compiled function is compiled again
        return {k: v for k, v in vars(self).items() if k != "var_es"}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self.var_es = compiled(var_es_nb, _SIGNATURE)

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
        self._before = None

    def check(self, symbol: str, delta_units: float) -> tuple[float, float, float, float, int] | None:
        """(VaR before, ES before, VaR after, ES after, k), or None while the window has no tail yet."""
        k = self.k_by_used[self.used]
        if k < 1:
            return None
        i = self.index[symbol]
        if self._before is None:
            self._before = self.var_es(self.scenarios, self.returns, i, 0.0, self.used, k)
        delta = delta_units * (self.sampled[i] or self.marks[i])
        return (*self._before, *self.var_es(self.scenarios, self.returns, i, delta, self.used, k), k)
