"""The feature pipeline in its two forms, over the kernels of core/features/kernels.py.

- `FeaturePipeline.update(msg)`: the incremental form, one market data event in, its row out (live
  scoring). It keeps one state per symbol.
- `batch(spec, columns)`: the batch form, a whole range of one symbol's events at once (training).
Fed the same events of a symbol from the same start, both give the same rows, bit for bit.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import numpy as np

from foxhunt.core.features import kernels as k
from foxhunt.core.features.spec import FeatureSpec
from foxhunt.core.jit import direct
from foxhunt.messages.market import AggressorSide, Bar, MarketData, QuoteTick, TradeTick

_SIGN = {AggressorSide.BUYER: 1.0, AggressorSide.SELLER: -1.0, AggressorSide.NONE: 0.0}


def new_state(spec: FeatureSpec) -> np.ndarray:
    """A symbol's state before its first event, with the spec's parameters in it (kernels.P_*); the decay
    weight of a half-life h is 1 - 2^(-1/h)."""
    horizons = spec.return_horizons
    state = np.zeros(k.P_HORIZONS + len(horizons) + horizons[-1] + 1, dtype=np.float64)
    state[k.HORIZONS] = len(horizons)
    state[k.P_RING] = horizons[-1] + 1
    state[k.P_ALPHA_VOL] = 1.0 - 2.0 ** (-1.0 / spec.vol_halflife)
    state[k.P_ALPHA_FLOW] = 1.0 - 2.0 ** (-1.0 / spec.flow_halflife)
    state[k.P_HORIZONS : k.P_HORIZONS + len(horizons)] = horizons
    return state


def event(msg: MarketData) -> tuple[int, float, float, float, float]:
    """(kind, v0, v1, v2, v3) of a market data message (kernels' module docstring)."""
    if type(msg) is QuoteTick:
        return k.QUOTE, float(msg.bid), float(msg.ask), float(msg.bid_size), float(msg.ask_size)
    if type(msg) is TradeTick:
        return k.TRADE, float(msg.price), float(msg.size), _SIGN[msg.aggressor], 0.0
    if type(msg) is Bar:
        return k.BAR, float(msg.close), float(msg.high), float(msg.low), float(msg.volume)
    raise TypeError(f"not market data: {type(msg).__name__}")


class Columns(NamedTuple):
    """One symbol's events as arrays, in order."""

    ts: np.ndarray  # int64, ts_event
    kind: np.ndarray  # int64, kernels.QUOTE/TRADE/BAR
    values: np.ndarray  # float64 [n, 4]

    @classmethod
    def of(cls, messages: list[MarketData]) -> Columns:
        n = len(messages)
        ts = np.fromiter((m.ts_event for m in messages), dtype=np.int64, count=n)
        rows = [event(m) for m in messages]
        kind = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        values = np.array([r[1:] for r in rows], dtype=np.float64).reshape(n, 4)
        return cls(ts, kind, values)

    def __len__(self) -> int:
        return int(self.ts.size)

    @classmethod
    def concat(cls, parts: list[Columns]) -> Columns:
        """Several ranges of one symbol merged in time order (ties keep the order of `parts`)."""
        whole = cls(np.concatenate([p.ts for p in parts]), np.concatenate([p.kind for p in parts]),
                    np.concatenate([p.values for p in parts]).reshape(-1, 4))
        order = np.argsort(whole.ts, kind="stable")
        return cls(whole.ts[order], whole.kind[order], np.ascontiguousarray(whole.values[order]))


class ColumnsBuilder:
    """One symbol's events gathered into Columns as they come, 48 bytes an event (no message kept)."""

    def __init__(self) -> None:
        self.ts = array("q")
        self.kind = array("q")
        self.values = array("d")

    def add(self, msg: MarketData) -> None:
        kind, v0, v1, v2, v3 = event(msg)
        self.ts.append(msg.ts_event)
        self.kind.append(kind)
        self.values.extend((v0, v1, v2, v3))

    def __len__(self) -> int:
        return len(self.ts)

    def columns(self) -> Columns:
        return Columns(np.frombuffer(self.ts, dtype=np.int64).copy(), np.frombuffer(self.kind, dtype=np.int64).copy(),
                       np.frombuffer(self.values, dtype=np.float64).reshape(-1, 4).copy())


def batch(spec: FeatureSpec, columns: Columns, state: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows [n, width], reference prices [n]) of one symbol's events, from `state` (a fresh one by
    default; it is updated, so a range can be continued)."""
    _, run = k.kernels()
    state = new_state(spec) if state is None else state
    n = len(columns)
    rows = np.empty((n, spec.width), dtype=np.float64)
    prices = np.empty(n, dtype=np.float64)
    run(state, columns.ts, columns.kind, np.ascontiguousarray(columns.values), rows, prices)
    return rows, prices


class FeaturePipeline:
    """The incremental form: `update(msg)` returns the event's row, in a buffer that the next call
    overwrites (copy it to keep it)."""

    def __init__(self, spec: FeatureSpec) -> None:
        self.spec = spec
        self.states: dict[str, np.ndarray] = {}
        self.row = np.zeros(spec.width, dtype=np.float64)
        self._step = direct(k.kernels()[0])  # no numba dispatch per call (core/jit.py)

    def update(self, msg: MarketData) -> np.ndarray:
        state = self.states.get(msg.symbol)
        if state is None:
            state = self.states[msg.symbol] = new_state(self.spec)
        if type(msg) is QuoteTick:  # the common case spelt out: event() costs a tuple and four floats
            self._step(state, msg.ts_event, k.QUOTE, msg.bid, msg.ask, msg.bid_size, msg.ask_size, self.row)
        else:
            self._step(state, msg.ts_event, *event(msg), self.row)
        return self.row
