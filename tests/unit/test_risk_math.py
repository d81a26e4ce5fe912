"""foxhunt.risk: conventions pinned by hand computations, and clear errors for meaningless inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt import risk
from foxhunt.risk import RiskInputError

HUNDRED = np.array([(-50 + i) / 1000 for i in range(100)])  # losses 0.050, 0.049, ... in the tail


def test_tail_count_is_exact_where_floating_point_is_not():
    assert 100 * (1 - 0.95) > 5  # in binary floating point the tail would hold 6
    assert risk.tail_count(100, 0.95) == 5
    assert risk.tail_count(100, 0.99) == 1
    assert risk.tail_count(250, 0.99) == 3  # ceil(2.5)
    assert risk.tail_count(1000, 0.975) == 25


def test_historical_var_is_the_kth_largest_loss_and_es_the_mean_of_the_k():
    assert risk.var_historical(HUNDRED, 0.95) == pytest.approx(0.046)  # 5th worst: 0.050 ... 0.046
    assert risk.expected_shortfall(HUNDRED, 0.95) == pytest.approx((0.050 + 0.049 + 0.048 + 0.047 + 0.046) / 5)
    assert risk.var_historical(HUNDRED, 0.99) == pytest.approx(0.050)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-0.5, 0.5), min_size=20, max_size=300), st.sampled_from([0.9, 0.95, 0.975, 0.99]))
def test_compiled_tail_statistics_match_a_plain_numpy_twin(values, confidence):
    returns = np.array(values)
    k = math.ceil(round(len(values) * (1 - confidence), 9))
    losses = np.sort(-returns)[::-1]
    assert risk.var_historical(returns, confidence) == losses[k - 1]
    assert risk.expected_shortfall(returns, confidence) == pytest.approx(losses[:k].mean(), rel=1e-12, abs=1e-15)
    assert risk.expected_shortfall(returns, confidence) >= risk.var_historical(returns, confidence)


def test_parametric_var_uses_the_sample_deviation_and_subtracts_the_mean():
    returns = np.array([0.01, -0.02, 0.03, 0.0, -0.01])
    expected = 2.3263478740408408 * np.std(returns, ddof=1) - returns.mean()
    assert risk.var_parametric(returns, 0.99) == pytest.approx(expected, rel=1e-12)
    assert risk.var_parametric_from(0.001, 0.02, 0.95) == pytest.approx(1.6448536269514722 * 0.02 - 0.001)


def test_cornish_fisher_equals_parametric_for_a_normal_and_grows_with_fat_tails_and_left_skew():
    normal = risk.var_cornish_fisher(0.0, 0.01, 0.0, 3.0, 0.99)
    assert normal == pytest.approx(risk.var_parametric_from(0.0, 0.01, 0.99), rel=1e-12)
    assert risk.var_cornish_fisher(0.0, 0.01, 0.0, 6.0, 0.99) > normal
    assert risk.var_cornish_fisher(0.0, 0.01, -1.0, 3.0, 0.99) > normal


def test_portfolio_var_scales_with_root_time_and_reports_the_diversification_benefit():
    cov = [[1e-4, 0.0], [0.0, 4e-4]]
    one_day = risk.portfolio_var([1e6, 1e6], cov, 0.99, 1)
    z = 2.3263478740408408
    assert one_day.var == pytest.approx(z * math.sqrt(1e-4 * 1e12 + 4e-4 * 1e12))
    assert one_day.standalone == pytest.approx((z * 1e6 * 0.01, z * 1e6 * 0.02))
    assert one_day.diversification_benefit == pytest.approx(sum(one_day.standalone) - one_day.var)
    assert risk.portfolio_var([1e6, 1e6], cov, 0.99, 10).var == pytest.approx(one_day.var * math.sqrt(10))
    hedged = risk.portfolio_var([1e6, -1e6], [[1e-4, 1e-4], [1e-4, 1e-4]], 0.99)
    assert hedged.var == pytest.approx(0.0, abs=1e-6)


def test_kelly_formulas():
    assert risk.kelly_fraction(0.6, 1.0) == pytest.approx(0.2)  # p - q/b for an even bet
    assert risk.kelly_fraction(0.5, 2.0, loss=1.0) == pytest.approx(0.25)
    assert risk.kelly_fraction(0.3, 1.0) == 0.0  # never negative: no bet
    assert risk.kelly_continuous(0.10, 0.02, 0.20) == pytest.approx(2.0)
    cov = np.array([[0.04, 0.01], [0.01, 0.09]])
    f = risk.kelly_multi([0.10, 0.08], 0.02, cov)
    assert cov @ f == pytest.approx(np.array([0.08, 0.06]))
    assert risk.kelly_size(2.0, fraction=0.5, max_leverage=0.8) == 0.8
    assert risk.kelly_size(-0.4, fraction=0.5, max_leverage=1.0) == -0.2


def test_price_bands_by_tier_price_and_time_of_day():
    midday, opening, closing = 12 * 60, 9 * 60 + 40, 15 * 60 + 50
    assert risk.price_band(100.0, 1, midday) == pytest.approx((95.0, 105.0))
    assert risk.price_band(100.0, 2, midday) == pytest.approx((90.0, 110.0))
    assert risk.price_band(100.0, 1, opening) == pytest.approx((90.0, 110.0))
    assert risk.price_band(100.0, 2, closing) == pytest.approx((80.0, 120.0))
    assert risk.price_band(2.0, 1, midday) == pytest.approx((1.6, 2.4))
    assert risk.price_band(0.5, 1, midday) == pytest.approx((0.35, 0.65))  # $0.15 is less than 75%


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: risk.var_historical([], 0.95), "non-empty"),
        (lambda: risk.var_historical([0.01] * 10, 0.95), None),
        (lambda: risk.var_historical([0.01, float("nan")], 0.5), "NaN or infinite values \\(first at index 1\\)"),
        (lambda: risk.var_historical([0.01] * 100, 1.0), "strictly between 0 and 1"),
        (lambda: risk.var_parametric([0.01], 0.95), "at least 2 returns"),
        (lambda: risk.kelly_continuous(0.1, 0.0, 0.0), "sigma must be positive"),
        (lambda: risk.kelly_multi([0.1, 0.1], 0.0, [[0.04, 0.04], [0.04, 0.04]]), "singular"),
        (lambda: risk.kelly_fraction(1.2, 1.0), "probability"),
        (lambda: risk.portfolio_var([1.0], [[1.0, 0.0]], 0.99), "must be 1x1"),
        (lambda: risk.price_band(-1.0, 1, 600), "positive"),
    ],
)
def test_meaningless_inputs_raise_a_clear_error(call, message):
    if message is None:  # 10 returns at 95%: k = ceil(0.5) = 1, a valid (if thin) tail
        assert call() == pytest.approx(-0.01)
        return
    with pytest.raises(RiskInputError, match=message):
        call()
