"""A training set from journals, never from loose files: the market data inputs of one or more journals
(ingested files or recorded runs), in each journal's order, through the batch form of the feature pipeline.

A sample is the window of the `window` rows of one symbol that end at row t, and its labels are the
forward log returns of the symbol's reference price over each horizon h (rows t to t+h). The samples of
all symbols are ordered by the time of their last row and split into train, validation and test ranges
by the configured fractions; a sample stays in its range only if its longest label ends before the next
range starts (a purge), so no label overlaps the range after it.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import NamedTuple

import msgspec
import numpy as np

from foxhunt.core.features import Columns, ColumnsBuilder, FeatureSpec, batch
from foxhunt.errors import DataError
from foxhunt.messages.market import MARKET_DATA_TYPES
from foxhunt.models.configs import TrainConfig
from foxhunt.ports import JournalStore


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """What a journal gave the training set: its market data inputs between these sequence numbers."""

    journal: str
    first_seq: int
    last_seq: int
    events: int


class Splits(NamedTuple):
    train: np.ndarray  # row indices of the samples' last rows, in time order
    validation: np.ndarray
    test: np.ndarray
    purged: int  # samples dropped because a label reached into the next range


class Dataset(NamedTuple):
    rows: np.ndarray  # float32 [rows, features]: every symbol's rows, one symbol after another
    labels: np.ndarray  # float32 [rows, horizons]; meaningful at sample rows only
    samples: np.ndarray  # every sample's last row, in time order
    splits: Splits | None  # None when built to evaluate on all of it
    window: int
    symbols: dict[str, int]  # rows per symbol
    sources: list[Source]

    def windows(self, ends: np.ndarray) -> np.ndarray:
        """The samples ending at rows `ends`: float32 [len(ends), window, features]."""
        return self.rows[ends[:, None] + np.arange(1 - self.window, 1)]

    def describe(self) -> dict[str, int]:
        s = self.splits
        if s is None:
            return {"samples": len(self.samples)}
        return {"train": len(s.train), "validation": len(s.validation), "test": len(s.test), "purged": s.purged}


async def read_market_data(
    store: JournalStore, journals: list[str], start_ns: int | None = None, end_ns: int | None = None
) -> tuple[dict[str, Columns], list[Source]]:
    """Each symbol's market data inputs from `journals` with start_ns <= ts_event < end_ns, as arrays (no
    message is kept: 48 bytes an event): a journal's in its order, several journals' merged by ts_event
    (ties in the order the journals were given)."""
    parts: dict[str, list[Columns]] = {}
    sources = []
    for name in journals:
        await store.info(name)
        builders: dict[str, ColumnsBuilder] = {}
        first = last = events = 0
        async with aclosing(store.read(name, decode_derived=False)) as pages:
            async for page in pages:
                for record in page:
                    msg = record.message
                    if record.causation is not None or type(msg) not in MARKET_DATA_TYPES:
                        continue
                    if (start_ns is not None and msg.ts_event < start_ns) or (end_ns is not None and msg.ts_event >= end_ns):
                        continue
                    builder = builders.get(msg.symbol)
                    if builder is None:
                        builder = builders[msg.symbol] = ColumnsBuilder()
                    builder.add(msg)
                    first, last, events = first or record.seq, record.seq, events + 1
        for symbol, builder in builders.items():
            parts.setdefault(symbol, []).append(builder.columns())
        sources.append(Source(journal=name, first_seq=first, last_seq=last, events=events))
    market = {s: p[0] if len(p) == 1 else Columns.concat(p) for s, p in parts.items()}
    return market, sources


def build(market: dict[str, Columns], sources: list[Source], spec: FeatureSpec, cfg: TrainConfig,
          *, splits: bool = True) -> Dataset:
    horizons = np.array(cfg.horizons)
    longest = int(horizons[-1])
    rows, labels, ends, starts_ts, ends_ts, symbols = [], [], [], [], [], {}
    offset = 0
    for symbol in sorted(market):
        columns = market[symbol]
        features, prices = batch(spec, columns)
        n = len(columns)
        symbols[symbol] = n
        label = np.zeros((n, len(horizons)), dtype=np.float64)
        t = np.arange(cfg.window - 1, n - longest)
        if t.size:
            later = prices[t[:, None] + horizons]
            now = prices[t][:, None]
            ok = (now[:, 0] > 0) & (later > 0).all(axis=1)
            t = t[ok]
            label[t] = np.log(prices[t[:, None] + horizons] / prices[t][:, None])
        rows.append(features)
        labels.append(label)
        ends.append(t + offset)
        starts_ts.append(columns.ts[t])
        ends_ts.append(columns.ts[t + longest])
        offset += n
    if not offset:
        looked = ", ".join(f"{s.journal} ({s.events} market data inputs)" for s in sources)
        raise DataError(f"no market data to train on in {looked}")
    order = np.argsort(np.concatenate(starts_ts), kind="stable")
    samples = np.concatenate(ends)[order]
    if not samples.size:
        raise DataError(f"{offset} market data events give no sample: a window of {cfg.window} rows and labels"
                        f" {cfg.horizons[-1]} rows ahead need more events of one symbol")
    parts = split(samples, np.concatenate(starts_ts)[order], np.concatenate(ends_ts)[order], cfg) if splits else None
    return Dataset(
        np.concatenate(rows).astype(np.float32), np.concatenate(labels).astype(np.float32), samples, parts,
        cfg.window, symbols, sources,
    )


def split(ends: np.ndarray, ts: np.ndarray, label_ts: np.ndarray, cfg: TrainConfig) -> Splits:
    """Train, validation and test samples from samples in time order (`ts` of their last row, `label_ts`
    of their longest label's end), purged."""
    n = ends.size
    if n < 3:
        raise DataError(f"{n} samples (windows of {cfg.window} rows with labels {cfg.horizons[-1]} rows ahead)"
                        " are too few to split into train, validation and test")
    cut1 = ts[int(n * cfg.train_fraction)]
    cut2 = ts[int(n * (cfg.train_fraction + cfg.validation_fraction))]
    train = (ts < cut1) & (label_ts < cut1)
    validation = (ts >= cut1) & (ts < cut2) & (label_ts < cut2)
    test = ts >= cut2
    purged = int(n - train.sum() - validation.sum() - test.sum())
    out = Splits(ends[train], ends[validation], ends[test], purged)
    empty = [name for name, part in zip(("train", "validation", "test"), out[:3], strict=True) if not part.size]
    if empty:
        raise DataError(f"the {' and '.join(empty)} range would hold no sample after the purge ({n} samples,"
                        f" {purged} purged): train on a longer range or change train_fraction/validation_fraction")
    return out
