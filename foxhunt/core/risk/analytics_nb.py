"""Risk mathematics as numba kernels over arrays: value at risk, expected shortfall, Kelly sizing.

Kernels are the `*_nb` functions: plain Python, compiled with explicit signatures by `kernels()` on
first use (never at import, so importing foxhunt builds nothing), never raising; core/risk/analytics.py
(public as `foxhunt.risk`) wraps them with the checks that make their numbers meaningful. Conventions:
returns are simple returns, losses are positive numbers, confidence is the probability of not losing more
than the VaR.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from foxhunt.core.jit import compiled


def var_historical_nb(returns: np.ndarray, k: int) -> float:
    """The k-th largest loss (k >= 1)."""
    losses = np.sort(-returns)
    return losses[losses.size - k]


def expected_shortfall_nb(returns: np.ndarray, k: int) -> float:
    """The mean of the k largest losses."""
    losses = np.sort(-returns)
    total = 0.0
    for i in range(losses.size - k, losses.size):
        total += losses[i]
    return total / k


def mean_std_nb(returns: np.ndarray) -> tuple:
    """Mean and sample standard deviation (ddof=1), in two passes for accuracy."""
    n = returns.size
    mean = 0.0
    for x in returns:
        mean += x
    mean /= n
    ss = 0.0
    for x in returns:
        ss += (x - mean) * (x - mean)
    return mean, math.sqrt(ss / (n - 1))


def cornish_fisher_quantile_nb(z: float, skew: float, kurtosis: float) -> float:
    """The lower-tail standardised quantile for a one-sided normal quantile z, adjusted for skew and raw
    kurtosis (3 for a normal) by the Cornish-Fisher expansion to the fourth moment (Cornish & Fisher
    1937; as in Zangari 1996, RiskMetrics Monitor Q1)."""
    q = -z
    excess = kurtosis - 3.0
    return (
        q
        + (q * q - 1.0) * skew / 6.0
        + (q ** 3 - 3.0 * q) * excess / 24.0
        - (2.0 * q ** 3 - 5.0 * q) * skew * skew / 36.0
    )


def portfolio_sigma_nb(exposures: np.ndarray, covariance: np.ndarray) -> float:
    """sqrt(w' C w) for exposures w in money and a covariance of simple returns."""
    n = exposures.size
    total = 0.0
    for i in range(n):
        row = 0.0
        for j in range(n):
            row += covariance[i, j] * exposures[j]
        total += exposures[i] * row
    return math.sqrt(max(total, 0.0))


SIGNATURES = {
    var_historical_nb: "float64(float64[::1], int64)",
    expected_shortfall_nb: "float64(float64[::1], int64)",
    mean_std_nb: "UniTuple(float64, 2)(float64[::1])",
    cornish_fisher_quantile_nb: "float64(float64, float64, float64)",
    portfolio_sigma_nb: "float64(float64[::1], float64[:, ::1])",
}

def kernels() -> SimpleNamespace:
    """The compiled kernels (core/jit.py: compiled once, on first call)."""
    return SimpleNamespace(**{fn.__name__: compiled(fn, sig) for fn, sig in SIGNATURES.items()})
