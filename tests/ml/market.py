"""Synthetic market data for the model tests: quotes with sizes, trades with and without an aggressor,
and bars, for a few symbols, on an irregular clock (seeded)."""

from __future__ import annotations

import numpy as np

from foxhunt.core.features import Columns, ColumnsBuilder
from foxhunt.messages.market import AggressorSide, Bar, MarketData, PriceType, QuoteTick, TradeTick

START = 1_700_000_000_000_000_000
SIDES = [AggressorSide.BUYER, AggressorSide.SELLER, AggressorSide.NONE]


def messages(n: int, seed: int = 1, symbols: tuple[str, ...] = ("EURUSD", "GBPUSD"), bars: bool = True) -> list[MarketData]:
    rng = np.random.default_rng(seed)
    mids = {s: 1.1e9 + 0.2e9 * i for i, s in enumerate(symbols)}
    ts = START
    out: list[MarketData] = []
    for _ in range(n):
        ts += int(rng.integers(1, 5_000_000_000))
        symbol = symbols[int(rng.integers(len(symbols)))]
        mids[symbol] *= float(np.exp(rng.normal(0.0, 2e-4)))
        mid = int(round(mids[symbol], -4))
        draw = rng.random()
        if draw < 0.6:
            half = int(rng.integers(1, 4)) * 10_000
            out.append(QuoteTick(ts_event=ts, ts_init=ts, symbol=symbol, bid=mid - half, ask=mid + half,
                                 bid_size=int(rng.integers(0, 5)) * 10**15, ask_size=int(rng.integers(0, 5)) * 10**15))
        elif draw < 0.9 or not bars:
            out.append(TradeTick(ts_event=ts, ts_init=ts, symbol=symbol, price=mid, size=int(rng.integers(1, 9)) * 10**14,
                                 aggressor=SIDES[int(rng.integers(3))]))
        else:
            out.append(Bar(ts_event=ts, ts_init=ts, symbol=symbol, price_type=PriceType.MID, interval_ns=60 * 10**9,
                           open=mid, high=mid + 30_000, low=mid - 30_000, close=mid, volume=10**15))
    return out


def by_symbol(msgs: list[MarketData]) -> dict[str, list[MarketData]]:
    out: dict[str, list[MarketData]] = {}
    for m in msgs:
        out.setdefault(m.symbol, []).append(m)
    return out


def columns_by_symbol(msgs: list[MarketData]) -> dict[str, Columns]:
    """Each symbol's events as the data set reads them from a journal (ColumnsBuilder)."""
    builders: dict[str, ColumnsBuilder] = {}
    for m in msgs:
        builders.setdefault(m.symbol, ColumnsBuilder()).add(m)
    return {symbol: b.columns() for symbol, b in builders.items()}
