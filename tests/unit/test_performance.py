"""The report's metrics (runtime/performance.py) against a reference: empyrical-reloaded, on the same
return series, to 1e-9 relative; and the pieces it does not have (sampling, durations, exposure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foxhunt.runtime import performance

empyrical = pytest.importorskip("empyrical", reason="empyrical-reloaded is a test dependency (pyproject.toml)")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("periods_per_year", [252.0, 365.0 * 24 * 60])
def test_the_metrics_agree_with_empyrical(seed, periods_per_year):
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0004, 0.01, 500)
    r[rng.integers(0, 500, 40)] = 0.0  # flat periods, as a strategy out of the market has
    ours = performance.metrics(r, periods_per_year)
    theirs = {
        "total_return": empyrical.cum_returns_final(r),
        "annual_return": empyrical.annual_return(r, annualization=periods_per_year),
        "annual_volatility": empyrical.annual_volatility(r, annualization=periods_per_year),
        "sharpe": empyrical.sharpe_ratio(r, annualization=periods_per_year),
        "sortino": empyrical.sortino_ratio(r, annualization=periods_per_year),
        "calmar": empyrical.calmar_ratio(r, annualization=periods_per_year),
        "max_drawdown": empyrical.max_drawdown(r),
    }
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(float(value), rel=1e-9, abs=1e-15), key


def test_a_run_that_never_moved_has_no_ratios():
    m = performance.metrics(np.zeros(200), 252.0)
    assert m["total_return"] == 0.0 and m["max_drawdown"] == 0.0
    assert all(math.isnan(m[k]) for k in ("sharpe", "sortino", "calmar"))


def test_period_sampling_reads_the_step_function_at_each_period_end():
    s = performance.SECOND
    ts = np.array([0, 1, 2, 5]) * s + 10 * s
    equity = np.array([1.0, 2.0, 3.0, 4.0])
    assert performance.sample(ts, equity, 10 * s, 2 * s).tolist() == [3.0, 3.0, 4.0]  # ends at 12, 14, 16 s
    assert performance.period_for(3 * 3600 * s) == 60 * s  # 3 hours: 180 minutes
    assert performance.period_for(400 * 86_400 * s) == 86_400 * s
    assert performance.period_for(10 * s) == s  # too short for 100 of anything: seconds


def test_drawdown_duration_counts_periods_below_the_peak():
    r = np.array([0.1, -0.05, 0.01, 0.05, -0.2, 0.0])
    # peak after period 1; below it for periods 2 and 3, back above at 4; below again from 5 to the end
    assert performance.drawdown_duration(r) == 2


def test_trade_stats_and_exposure():
    stats = performance.trade_stats(np.array([2.0, -1.0, 3.0, -1.0]))
    assert stats == {"round_trips": 4.0, "hit_rate": 0.5, "profit_factor": 2.5}
    assert math.isnan(performance.trade_stats(np.array([]))["hit_rate"])
    ts = np.array([0, 10, 30])
    assert performance.exposure(ts, np.array([1, 0, 1]), 0, 40) == pytest.approx((10 + 10) / 40)
