"""A run's performance figures from its equity curve and its round trips: pure functions over numpy arrays.

The conventions, stated in every report:

- **Returns** are the equity's change over each period of a fixed length (`period_ns`), divided by a
  capital base (`capital`): PnL of a fixed capital, not compounded. The period is the longest of 1 s, 1
  min, 5 min, 15 min, 1 h, 4 h, 1 day that gives at least `MIN_PERIODS` returns over the run (a day for a
  run of half a year or more), so that a run of hours and a run of years are both measured.
- **Annualised** by calendar time: `periods_per_year = 365 days / period` (markets that trade around the
  clock, as foxhunt's instruments do; an equity desk would count 252 days of 6.5 hours). Annualised return
  is compounded: `(1 + total)^(1 / years) - 1`, with `years = n / periods_per_year`; volatility is the
  sample standard deviation (ddof 1) times `sqrt(periods_per_year)`; Sharpe is the mean over that standard
  deviation times `sqrt(periods_per_year)` (risk-free rate 0); Sortino the annualised mean over the
  annualised downside deviation, `sqrt(mean(min(r, 0)^2) * periods_per_year)`; Calmar the annualised return
  over the maximum drawdown. These are empyrical's definitions (quantopian/empyrical, `stats.py`), and
  tests/unit/test_performance.py checks them against empyrical-reloaded to 1e-9.
- **Maximum drawdown** is the largest fall of the compounded return index from its running peak, as a
  fraction; its **duration** the longest time from a peak until the index is back at it (or the run ends).
- **Hit rate** and **profit factor** are over round trips (a position from flat back to flat, a flip closing
  one and opening the next): winners over all, and the winners' PnL over the losers'.
- **Turnover** is the traded notional over the capital; **exposure** the share of the run's time with a
  position open.
"""

from __future__ import annotations

import math

import numpy as np

SECOND = 1_000_000_000
YEAR_NS = 365 * 86_400 * SECOND
PERIODS_NS = (SECOND, 60 * SECOND, 300 * SECOND, 900 * SECOND, 3600 * SECOND, 4 * 3600 * SECOND, 86_400 * SECOND)
MIN_PERIODS = 100


def period_for(span_ns: int) -> int:
    """The longest standard period that cuts `span_ns` into at least MIN_PERIODS returns."""
    fitting = [p for p in PERIODS_NS if span_ns // p >= MIN_PERIODS]
    return fitting[-1] if fitting else PERIODS_NS[0]


def sample(ts: np.ndarray, values: np.ndarray, start: int, period_ns: int) -> np.ndarray:
    """The step function (ts, values) read at the end of each period from `start` to the last timestamp:
    the last value at or before each period's end (0 before the first)."""
    if len(ts) == 0:
        return np.zeros(1)
    n = max(1, -(-(int(ts[-1]) - start) // period_ns))
    ends = start + period_ns * np.arange(1, n + 1)
    at = np.searchsorted(ts, ends, side="right") - 1
    return np.where(at >= 0, values[np.maximum(at, 0)], 0.0)


def returns(equity: np.ndarray, capital: float) -> np.ndarray:
    """Each period's PnL over the capital: the equity read at period ends, from 0 at the start."""
    return np.diff(np.concatenate([[0.0], equity])) / capital


def drawdown(r: np.ndarray) -> np.ndarray:
    """The compounded return index's fall from its running peak, per period (0 or negative)."""
    index = np.cumprod(1.0 + r)
    peak = np.maximum.accumulate(np.concatenate([[1.0], index]))[1:]
    return index / peak - 1.0


def drawdown_duration(r: np.ndarray) -> int:
    """The most periods from a peak of the return index until it is reached again (or the run ends)."""
    index = np.concatenate([[1.0], np.cumprod(1.0 + r)])
    peak = np.maximum.accumulate(index)
    longest = run = 0
    for below in index < peak:
        run = run + 1 if below else 0
        longest = max(longest, run)
    return longest


def metrics(r: np.ndarray, periods_per_year: float) -> dict[str, float]:
    """The return-series figures, by the conventions above (NaN where a figure has no value: a Sharpe
    ratio of a run that never moved)."""
    n = len(r)
    total = float(np.prod(1.0 + r) - 1.0)
    years = n / periods_per_year
    annual = (1.0 + total) ** (1.0 / years) - 1.0 if total > -1.0 else -1.0
    std = float(np.std(r, ddof=1)) if n > 1 else math.nan
    mean = float(np.mean(r)) if n else math.nan
    downside = math.sqrt(float(np.mean(np.minimum(r, 0.0) ** 2)) * periods_per_year) if n else math.nan
    max_dd = float(drawdown(r).min()) if n else 0.0
    return {
        "total_return": total,
        "annual_return": annual,
        "annual_volatility": std * math.sqrt(periods_per_year),
        "sharpe": mean / std * math.sqrt(periods_per_year) if std > 0 else math.nan,
        "sortino": mean * periods_per_year / downside if downside > 0 else math.nan,
        "calmar": annual / abs(max_dd) if max_dd < 0 else math.nan,
        "max_drawdown": max_dd,
    }


def trade_stats(pnls: np.ndarray) -> dict[str, float]:
    """Hit rate and profit factor of round trips' PnL (NaN without round trips, or without a loser)."""
    wins, losses = pnls[pnls > 0].sum(), -pnls[pnls < 0].sum()
    return {
        "round_trips": float(len(pnls)),
        "hit_rate": float((pnls > 0).mean()) if len(pnls) else math.nan,
        "profit_factor": float(wins / losses) if losses > 0 else math.nan,
    }


def exposure(ts: np.ndarray, open_position: np.ndarray, start: int, end: int) -> float:
    """The share of [start, end] with a position open: `open_position[i]` holds from ts[i] to ts[i+1]."""
    if end <= start or len(ts) == 0:
        return 0.0
    edges = np.concatenate([np.clip(ts, start, end), [end]])
    return float(np.sum(np.diff(edges) * open_position) / (end - start))
