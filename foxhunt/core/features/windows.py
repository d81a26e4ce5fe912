"""Feature windows as the scoring source and replay build them: each symbol's feature rows in the order its
market data inputs were journaled, kept with their sequence numbers, so the window that ended at any recent
input can be taken again.

The rows are those of the incremental pipeline (pipeline.py, bit for bit the batch form's that training
used), stored as float32 as training stores them, so a window here is byte for byte the sample a model was
trained and evaluated on. The rows start afresh with each run (a new FeatureWindows once the run's scoring
source has started): a restarted daemon and a replay of its journal build the same windows without reading
back what came before.
"""

from __future__ import annotations

import numpy as np

from foxhunt.core.features.pipeline import FeaturePipeline
from foxhunt.core.features.spec import FeatureSpec
from foxhunt.messages.market import MarketData


class _Rows:
    """One symbol's recent rows and their sequence numbers, in one buffer that is compacted when full."""

    __slots__ = ("n", "rows", "seqs")

    def __init__(self, capacity: int, width: int) -> None:
        self.rows = np.zeros((capacity, width), dtype=np.float32)
        self.seqs = np.zeros(capacity, dtype=np.int64)
        self.n = 0


class FeatureWindows:
    """`update(seq, msg)` adds the row of a market data input; `latest(symbol, n)` is the window of n rows
    that ends with the symbol's newest row, `at(symbol, seq, n)` the one that ended at input `seq` (if still
    kept: the newest `keep` rows are, at least). `window` is the longest window asked for."""

    def __init__(self, spec: FeatureSpec, window: int, keep: int = 4096) -> None:
        if window < 1 or keep < window:
            raise ValueError(f"a window of {window} rows needs keep >= window, got keep={keep}")
        self.spec, self.window, self.keep = spec, window, keep
        self.pipeline = FeaturePipeline(spec)
        self.symbols: dict[str, _Rows] = {}

    def update(self, seq: int, msg: MarketData) -> bool:
        """Add the row of `msg`, journaled as `seq`; whether the symbol has a whole (longest) window now."""
        row = self.pipeline.update(msg)
        rows = self.symbols.get(msg.symbol)
        if rows is None:
            rows = self.symbols[msg.symbol] = _Rows(2 * self.keep, self.spec.width)
        if rows.n == rows.rows.shape[0]:  # full: keep the newest `keep` rows
            rows.rows[: self.keep] = rows.rows[rows.n - self.keep : rows.n]
            rows.seqs[: self.keep] = rows.seqs[rows.n - self.keep : rows.n]
            rows.n = self.keep
        rows.rows[rows.n] = row  # float64 to float32, as training's dataset rounds them
        rows.seqs[rows.n] = seq
        rows.n += 1
        return rows.n >= self.window

    def latest(self, symbol: str, window: int) -> np.ndarray:
        """The `window` rows (at most the longest window) ending with the symbol's newest row: float32
        [window, width], a view the next update may overwrite."""
        rows = self.symbols[symbol]
        return rows.rows[rows.n - window : rows.n]

    def at(self, symbol: str, seq: int, window: int) -> np.ndarray | None:
        """A copy of the window that ended with the row of input `seq`; None if that row is not kept (another
        symbol's input, one older than the newest `keep`, one of an earlier run) or fewer rows came before."""
        rows = self.symbols.get(symbol)
        if rows is None:
            return None
        i = int(np.searchsorted(rows.seqs[: rows.n], seq))
        if i >= rows.n or rows.seqs[i] != seq or i + 1 < window:
            return None
        return rows.rows[i + 1 - window : i + 1].copy()
