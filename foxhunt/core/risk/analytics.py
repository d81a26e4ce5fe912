"""Risk mathematics: value at risk, expected shortfall, Kelly sizing, price bands.

Conventions:
- returns are simple returns (p1 / p0 - 1), as float arrays;
- losses are positive numbers: a VaR of 0.02 means a loss of 2%;
- `confidence` is the probability of not losing more than the VaR (0.95, 0.99);
- historical VaR is the k-th largest loss with k = ceil(n * (1 - confidence)), computed in exact
  rational arithmetic on the decimal you wrote, so 0.95 over 100 returns is the 5th worst loss, exactly
  (in binary floating point 1 - 0.95 is 0.05000000000000004 and would make it the 6th);
- parametric VaR is z * sigma - mu with the sample standard deviation (ddof=1) and z the standard normal
  quantile at `confidence`.

Inputs that make a number meaningless (an empty series, fewer returns than the confidence needs, NaN or
infinite values, zero variance where it divides, a singular covariance) raise `RiskInputError` naming
what is wrong. The compiled order path never raises; it returns reason codes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

import numpy as np

from foxhunt.core.risk import market_rules
from foxhunt.core.risk.analytics_nb import kernels
from foxhunt.errors import FoxhuntError


class RiskInputError(FoxhuntError, ValueError):
    """Inputs for which a risk number would be meaningless."""


# --- value at risk and expected shortfall --------------------------------------------------------


def tail_count(n: int, confidence: float) -> int:
    """k = ceil(n * (1 - confidence)), exactly: the number of losses in the tail."""
    _check_confidence(confidence)
    tail = Fraction(repr(confidence))
    return math.ceil(n * (1 - tail))


def var_historical(returns, confidence: float) -> float:
    r, k = _tail(returns, confidence)
    return float(kernels().var_historical_nb(r, k))


def expected_shortfall(returns, confidence: float) -> float:
    r, k = _tail(returns, confidence)
    return float(kernels().expected_shortfall_nb(r, k))


def _tail(returns, confidence: float) -> tuple[np.ndarray, int]:
    r = _returns(returns, "returns")
    k = tail_count(r.size, confidence)
    if k < 1:
        raise RiskInputError(f"{r.size} returns are too few for {confidence} confidence (k would be 0)")
    return r, k


def var_parametric(returns, confidence: float) -> float:
    r = _returns(returns, "returns")
    if r.size < 2:
        raise RiskInputError("parametric VaR needs at least 2 returns for a sample standard deviation")
    mu, sigma = kernels().mean_std_nb(r)
    return var_parametric_from(mu, sigma, confidence)


def var_parametric_from(mu: float, sigma: float, confidence: float) -> float:
    _finite(mu=mu, sigma=sigma)
    if sigma < 0:
        raise RiskInputError(f"sigma must not be negative, got {sigma}")
    return normal_quantile(confidence) * sigma - mu


def var_cornish_fisher(mu: float, sigma: float, skew: float, kurtosis: float, confidence: float) -> float:
    """VaR adjusted for skew and raw kurtosis (3 for a normal, where it equals the parametric VaR)."""
    _finite(mu=mu, sigma=sigma, skew=skew, kurtosis=kurtosis)
    if sigma < 0:
        raise RiskInputError(f"sigma must not be negative, got {sigma}")
    q = kernels().cornish_fisher_quantile_nb(normal_quantile(confidence), skew, kurtosis)
    return -(mu + sigma * q)


@dataclass(frozen=True)
class PortfolioVar:
    var: float  # VaR of the whole book, in money
    standalone: tuple[float, ...]  # VaR of each position alone
    diversification_benefit: float  # sum of the stand-alone VaRs minus the book's


def portfolio_var(exposures, covariance, confidence: float, horizon_days: float = 1.0) -> PortfolioVar:
    """Normal (zero-mean) VaR of a book of money exposures under a daily covariance of simple returns,
    scaled to the horizon by the square root of time."""
    w = _returns(exposures, "exposures")
    cov = np.ascontiguousarray(covariance, dtype=np.float64)
    if cov.shape != (w.size, w.size):
        raise RiskInputError(f"covariance must be {w.size}x{w.size} for {w.size} exposures, got {cov.shape}")
    if not np.isfinite(cov).all() or not np.allclose(cov, cov.T):
        raise RiskInputError("covariance must be finite and symmetric")
    if horizon_days <= 0 or not math.isfinite(horizon_days):
        raise RiskInputError(f"horizon_days must be positive, got {horizon_days}")
    scale = normal_quantile(confidence) * math.sqrt(horizon_days)
    book = scale * kernels().portfolio_sigma_nb(w, cov)
    alone = tuple(float(scale * abs(w[i]) * math.sqrt(max(cov[i, i], 0.0))) for i in range(w.size))
    return PortfolioVar(float(book), alone, float(sum(alone) - book))


def normal_quantile(confidence: float) -> float:
    _check_confidence(confidence)
    return NormalDist().inv_cdf(confidence)


# --- Kelly sizing ---------------------------------------------------------------------------------


def kelly_fraction(p: float, b: float, loss: float = 1.0) -> float:
    """Share of capital to stake on a bet that wins `b` per unit staked with probability `p` and loses
    `loss` per unit otherwise: f = p / loss - (1 - p) / b (Kelly 1956), never negative."""
    _finite(p=p, b=b, loss=loss)
    if not 0.0 <= p <= 1.0:
        raise RiskInputError(f"p must be a probability, got {p}")
    if b <= 0 or loss <= 0:
        raise RiskInputError(f"b and loss must be positive, got b={b} loss={loss}")
    return max(p / loss - (1.0 - p) / b, 0.0)


def kelly_continuous(mu: float, r: float, sigma: float) -> float:
    """Leverage maximising the growth rate of a lognormal asset: (mu - r) / sigma**2 (Merton 1969)."""
    _finite(mu=mu, r=r, sigma=sigma)
    if sigma <= 0:
        raise RiskInputError(f"sigma must be positive, got {sigma}")
    return (mu - r) / (sigma * sigma)


def kelly_multi(mu, r: float, covariance) -> np.ndarray:
    """Growth-optimal leverages of several assets: C^-1 (mu - r). A singular covariance is an error."""
    m = _returns(mu, "mu")
    cov = np.asarray(covariance, dtype=np.float64)
    if cov.shape != (m.size, m.size) or not np.isfinite(cov).all():
        raise RiskInputError(f"covariance must be a finite {m.size}x{m.size} matrix, got shape {cov.shape}")
    if np.linalg.matrix_rank(cov) < m.size or np.linalg.cond(cov) > 1e12:
        raise RiskInputError("covariance is singular (or nearly): Kelly leverages would be unbounded")
    return np.linalg.solve(cov, m - r)


def kelly_size(full_kelly: float, fraction: float = 0.5, max_leverage: float = 1.0) -> float:
    """Fractional Kelly with a leverage cap: the usual way to use Kelly, since the full fraction is
    optimal only for exactly known odds and halves growth for a small error in them."""
    _finite(full_kelly=full_kelly, fraction=fraction, max_leverage=max_leverage)
    if not 0 < fraction <= 1 or max_leverage <= 0:
        raise RiskInputError(f"needs 0 < fraction <= 1 and max_leverage > 0, got {fraction}, {max_leverage}")
    return max(-max_leverage, min(full_kelly * fraction, max_leverage))


# --- price bands ------------------------------------------------------------------------------------

def luld_band(
    reference: float, tier: int, minute_of_day: int, prior_close: float | None = None
) -> tuple[float, float]:
    """(lower, upper) Limit Up-Limit Down band around `reference` (the mean price of the last five
    minutes) for a Tier 1 or 2 NMS stock, as the LULD Plan writes it: the percentage from the previous
    close `prior_close` (from the reference itself when not given), doubled from 3:35 p.m. for Tier 1 and
    Tier 2 at $3.00 or less. `minute_of_day`: minutes since midnight, New York time. The rules and their
    sections: core/risk/market_rules.py."""
    _check_band(reference, tier, minute_of_day)
    if prior_close is not None:
        _finite(prior_close=prior_close)
        if prior_close <= 0:
            raise RiskInputError(f"prior_close must be positive, got {prior_close}")
    return market_rules.plan_band(reference, tier, minute_of_day, prior_close)


def mwcb_halt(prior_close: float, price: float, minute_of_day: int) -> tuple[int, int | None]:
    """(level, halt_minutes) of the market-wide circuit breaker (NYSE Rule 7.12, FINRA Rule 6121) for the
    S&P 500 at `price` against its previous close, at a minute of the day in New York time: Level 1 (7%)
    and Level 2 (13%) halt 15 minutes before 3:25 p.m. and 0 (no halt) from then on; Level 3 (20%) halts
    for the rest of the day (None); below 7%, (0, 0)."""
    _finite(prior_close=prior_close, price=price)
    if prior_close <= 0:
        raise RiskInputError(f"prior_close must be positive, got {prior_close}")
    _check_minute(minute_of_day)
    return market_rules.mwcb_halt(prior_close, price, minute_of_day)


def price_band(reference: float, tier: int, minute_of_day: int) -> tuple[float, float]:
    """(lower, upper) band of the around_the_clock policy (markets with no close): by tier around the
    reference, its percentage from the reference, doubled before 9:45 and from 15:35 of `minute_of_day`
    (in the policy's fixed offset). Not the LULD Plan: see `luld_band`."""
    _check_band(reference, tier, minute_of_day)
    return market_rules.clock_band(reference, tier, minute_of_day)


def _check_band(reference: float, tier: int, minute_of_day: int) -> None:
    _finite(reference=reference)
    if reference <= 0:
        raise RiskInputError(f"reference price must be positive, got {reference}")
    if tier not in (1, 2):
        raise RiskInputError(f"tier must be 1 or 2, got {tier}")
    _check_minute(minute_of_day)


def _check_minute(minute_of_day: int) -> None:
    if not 0 <= minute_of_day < 24 * 60:
        raise RiskInputError(f"minute_of_day must be in [0, 1440), got {minute_of_day}")


# --- checks ---------------------------------------------------------------------------------------


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
        raise RiskInputError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def _returns(values, name: str) -> np.ndarray:
    r = np.ascontiguousarray(values, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise RiskInputError(f"{name} must be a non-empty one-dimensional series, got shape {r.shape}")
    if not np.isfinite(r).all():
        raise RiskInputError(f"{name} contain NaN or infinite values (first at index {int(np.argmin(np.isfinite(r)))})")
    return r


def _finite(**values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value):
            raise RiskInputError(f"{name} must be finite, got {value}")
