"""The market an agent trades in: one symbol's market data, in order, with its feature rows.

From journals (`read`: the market data inputs of one symbol, as the data set of the forecasters reads
them, messages kept because the kernel trades on them) or from any list of messages (`Market.of`). The
rows come from the batch form of the feature pipeline, which gives the live form's rows bit for bit, so a
policy sees in training what it would see served.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import NamedTuple

import numpy as np

from foxhunt.core.features import Columns, FeatureSpec, batch
from foxhunt.errors import DataError
from foxhunt.messages.market import MARKET_DATA_TYPES, MarketData
from foxhunt.ports import JournalStore


class Market(NamedTuple):
    symbol: str
    data: list[MarketData]  # the symbol's market data, in order
    rows: np.ndarray  # float32 [len(data), spec.width]: the feature row after each event
    source: str  # where the data came from, for a manifest and a message

    @classmethod
    def of(cls, symbol: str, data: list[MarketData], spec: FeatureSpec, source: str) -> Market:
        rows, _ = batch(spec, Columns.of(data))
        return cls(symbol, data, rows.astype(np.float32), source)

    def __len__(self) -> int:
        return len(self.data)

    def split(self, held_out_fraction: float) -> tuple[Market, Market]:
        """(the first events, the last `held_out_fraction` of them): train on one, evaluate on the other.
        The held-out part's rows are those of the whole series (its features see the history before it, as
        they would live)."""
        cut = len(self.data) - int(len(self.data) * held_out_fraction)
        return (self._part(0, cut, "train"), self._part(cut, len(self.data), "held out"))

    def _part(self, start: int, end: int, what: str) -> Market:
        return Market(self.symbol, self.data[start:end], self.rows[start:end],
                      f"{self.source}, events {start}..{end - 1} ({what})")


async def read(store: JournalStore, journals: list[str], symbol: str, spec: FeatureSpec,
               start_ns: int | None = None, end_ns: int | None = None) -> Market:
    """The market data inputs of `symbol` in `journals` with start_ns <= ts_event < end_ns: each journal's
    in its order, the journals one after another (DataError where none has any)."""
    data: list[MarketData] = []
    counts = []
    for name in journals:
        await store.info(name)
        before = len(data)
        async with aclosing(store.read(name)) as pages:
            async for page in pages:
                for record in page:
                    msg = record.message
                    if (record.causation is not None or type(msg) not in MARKET_DATA_TYPES
                            or msg.symbol != symbol):
                        continue
                    ts = msg.ts_event
                    if (start_ns is not None and ts < start_ns) or (end_ns is not None and ts >= end_ns):
                        continue
                    data.append(msg)
        counts.append(f"{name} ({len(data) - before})")
    if not data:
        within = "" if start_ns is None and end_ns is None else f" between {start_ns} and {end_ns} ns"
        raise DataError(f"journals {', '.join(journals)} have no market data of {symbol}{within}")
    return Market.of(symbol, data, spec, f"{symbol} from journals {', '.join(counts)}")
