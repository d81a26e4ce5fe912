"""The ensemble strategy and the kernel's handling of model scores, on fakes: a score checked before any
strategy sees it, a failed model taking trading to REDUCING, the combined forecast worked by hand, a
decision waiting for every model, targets on a grid of steps and capped by the Kelly check."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategies import EnsembleParams, StrategyParams
from foxhunt.core.strategies.ensemble import Ensemble, moments
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import OrderFilled, Side, SubmitOrder
from foxhunt.messages.scores import ModelFailed, ModelScored, ScoreRefused, TargetChanged
from foxhunt.messages.system import TradingState, TradingStateChanged
from tests.fakes import INSTRUMENTS, quote

TAUS = [0.1, 0.5, 0.9]


def ensemble(models=("a",), weights=(), risk: RiskLimits | None = None, **params) -> Kernel:
    p = EnsembleParams(models=list(models), weights=list(weights), entry_bps=0.5, full_bps=4.0,
                       trade_size=Decimal("100000"), **params)
    gate = PreTradeGate(risk or RiskLimits(max_order_qty=Decimal("1000000")), INSTRUMENTS)
    k = Kernel(INSTRUMENTS, [Ensemble(p)], gate)
    k.handle(1, quote(1, "1.1", "1.1002"))
    return k


def score(model: str, as_of: int, outputs, symbol: str = "EURUSD", quantiles=TAUS, horizons=(1,)) -> ModelScored:
    return ModelScored(ts_event=as_of, ts_init=as_of + 1, model_id=model, parameter_sha256="p" * 64, symbol=symbol,
                       as_of=as_of, input_digest="i" * 64, horizons=list(horizons), quantiles=list(quantiles),
                       outputs=[float(x) for x in outputs], latency_ns=1000)


def kinds(step) -> list[str]:
    return [type(e).__name__ for e in step.derived]


def test_moments_of_the_piecewise_linear_quantile_function_by_hand():
    # Q: -1 on (0, .1), -1 to 1 on (.1, .5), 1 to 3 on (.5, .9), 3 on (.9, 1); zero at t = .3
    mean, p_up, up, down = moments(TAUS, [-1.0, 1.0, 3.0])
    assert math.isclose(down, 0.1 * 1 + 0.5 * 1 * 0.2)  # the flat tail, then the triangle down to t = .3
    assert math.isclose(up, 0.5 * 1 * 0.2 + 0.5 * (1 + 3) * 0.4 + 3 * 0.1)
    assert math.isclose(p_up, 0.7) and math.isclose(mean, up - down)
    assert moments(TAUS, [1.0, 2.0, 3.0])[1] == 1.0 and moments(TAUS, [-3.0, -2.0, -1.0])[1] == 0.0


def test_a_forecast_above_entry_sets_a_long_target_on_the_step_grid_with_its_edge():
    k = ensemble()
    step = k.handle(2, score("a", 1, [-1e-4, 3e-4, 6e-4]))  # mean 2.5 bp: 62.5% of trade_size, down to 50%
    target = next(e for e in step.derived if type(e) is TargetChanged)
    order = next(e for e in step.derived if type(e) is SubmitOrder)
    mean, p_up, up, down = moments(TAUS, [-1e-4, 3e-4, 6e-4])
    assert target.target == d("50000") and target.expected_return == mean and target.win_prob == p_up
    assert math.isclose(target.payoff, (up / p_up) / (down / (1 - p_up)))
    assert target.kelly_fraction > 0 and "as of seq 1" in target.reason
    assert order.side is Side.BUY and order.quantity == d("50000")
    assert order.edge_win_prob == p_up and order.edge_payoff == target.payoff


def test_below_entry_the_target_is_flat_and_a_position_is_closed_without_an_edge():
    k = ensemble()
    k.handle(2, score("a", 1, [-1e-4, 3e-4, 6e-4]))
    order_id = k.orders.open_for("EURUSD", "ensemble")[0].order_id
    k.handle(3, OrderFilled(ts_event=3, ts_init=3, order_id=order_id, symbol="EURUSD", side=Side.BUY,
                            last_qty=d("50000"), last_price=d("1.1001"), leaves_qty=0, trade_id="t1"))
    step = k.handle(4, score("a", 3, [-1e-5, 0.0, 1e-5]))  # mean 0: below entry
    target = next(e for e in step.derived if type(e) is TargetChanged)
    order = next(e for e in step.derived if type(e) is SubmitOrder)
    assert target.target == 0 and "below entry_bps" in target.reason
    assert order.side is Side.SELL and order.quantity == d("50000") and order.edge_win_prob is None


def test_a_decision_waits_for_every_model_of_the_window_and_drops_a_late_one():
    k = ensemble(models=("a", "b"), weights=(3.0, 1.0))
    assert kinds(k.handle(2, score("a", 1, [0.0, 4e-4, 8e-4]))) == []
    assert kinds(k.handle(3, score("b", 2, [0.0, 4e-4, 8e-4]))) == []  # a newer window: the first is dropped
    assert kinds(k.handle(4, score("a", 1, [0.0, 4e-4, 8e-4]))) == []  # late, for a superseded window
    step = k.handle(5, score("a", 2, [-8e-4, -4e-4, 0.0]))  # a: down, weight 3/4; b: up, weight 1/4
    target = next(e for e in step.derived if type(e) is TargetChanged)
    combined = [0.75 * a + 0.25 * b for a, b in zip([-8e-4, -4e-4, 0.0], [0.0, 4e-4, 8e-4], strict=True)]
    assert target.expected_return == moments(TAUS, combined)[0] < 0 and target.target < 0


def test_each_model_s_quantiles_are_sorted_before_they_are_averaged():
    k = ensemble()
    crossed = k.handle(2, score("a", 1, [6e-4, 3e-4, -1e-4]))
    assert next(e for e in crossed.derived if type(e) is TargetChanged).expected_return == moments(
        TAUS, [-1e-4, 3e-4, 6e-4])[0]


def test_models_that_do_not_forecast_the_same_quantiles_or_the_horizon_are_refused_by_the_strategy():
    k = ensemble(models=("a", "b"))
    k.handle(2, score("a", 1, [0.0, 4e-4, 8e-4]))
    step = k.handle(3, score("b", 1, [0.0, 1e-4, 4e-4, 8e-4], quantiles=[0.1, 0.3, 0.5, 0.9]))
    assert kinds(step) == ["ScoreRefused"] and "forecasts quantiles" in step.derived[0].reason
    k = ensemble(horizon=16)
    step = k.handle(2, score("a", 1, [0.0, 4e-4, 8e-4], horizons=(4,)))
    assert kinds(step) == ["ScoreRefused"] and "does not forecast horizon 16" in step.derived[0].reason


def test_the_horizon_picks_its_row_of_the_outputs():
    k = ensemble(horizon=4)
    step = k.handle(2, score("a", 1, [-9e-4, -8e-4, -7e-4, 1e-4, 2e-4, 3e-4], horizons=(1, 4)))
    assert next(e for e in step.derived if type(e) is TargetChanged).target > 0


@pytest.mark.parametrize(("change", "why"), [
    ({"symbol": "XAUUSD"}, "'XAUUSD' is not a configured instrument"),
    ({"outputs": [0.0, math.nan, 1.0]}, "output 1 is nan, not a finite number"),
    ({"outputs": [0.0, math.inf, 1.0]}, "output 1 is inf"),
    ({"outputs": [0.0, 1.0]}, "2 outputs for 1 horizons of 3 quantiles"),
    ({"quantiles": [0.5, 0.1, 0.9]}, "quantiles [0.5, 0.1, 0.9] are not increasing"),
    ({"quantiles": [0.0, 0.5, 1.0]}, "are not increasing inside (0, 1)"),
    ({"horizons": [4, 1], "outputs": [0.0] * 6}, "horizons [4, 1] are not increasing positive integers"),
    ({"horizons": []}, "horizons [] are not"),
])
def test_an_unusable_score_is_refused_and_tightens_trading_to_reducing(change, why):
    import msgspec

    k = ensemble()
    bad = msgspec.structs.replace(score("a", 1, [0.0, 4e-4, 8e-4]), **change)
    step = k.handle(2, bad)
    assert kinds(step) == ["ScoreRefused", "TradingStateChanged"]
    refused, changed = step.derived
    assert isinstance(refused, ScoreRefused) and why in refused.reason
    assert isinstance(changed, TradingStateChanged) and changed.state is TradingState.REDUCING
    assert not step.commands


def test_a_failed_model_takes_trading_to_reducing_and_the_strategy_then_only_reduces():
    k = ensemble()
    step = k.handle(2, ModelFailed(ts_event=2, ts_init=2, model_id="a", symbol="EURUSD", what="deadline",
                                   reason="no answer within deadline_ms=5"))
    changed = step.derived[0]
    assert changed.state is TradingState.REDUCING and "model a failed scoring EURUSD (deadline)" in changed.cause
    step = k.handle(3, score("a", 2, [-1e-4, 3e-4, 6e-4]))  # a long target: nothing to reduce, no order
    assert "SubmitOrder" not in kinds(step)


def test_the_kelly_check_caps_the_target():
    risk = RiskLimits(max_order_qty=Decimal("1000000"), kelly_capital=Decimal("30000"), kelly_multiplier=0.5)
    k = ensemble(risk=risk, levels=100)
    step = k.handle(2, score("a", 1, [-1e-4, 3e-4, 6e-4]))
    target = next(e for e in step.derived if type(e) is TargetChanged)
    cap = k.gate.kelly_quantity("EURUSD", target.win_prob, target.payoff, k)
    assert cap is not None and 0 < target.target <= cap < d("62500") and "capped by the Kelly check" in target.reason
    assert next(e for e in step.derived if type(e).__name__ == "OrderSubmitted")  # and the gate lets it through


def test_the_ensemble_needs_its_models_named():
    with pytest.raises(ValueError, match="needs models"):
        StrategyParams(name="ensemble")
    with pytest.raises(ValueError, match="2 weights for 1 models"):
        EnsembleParams(models=["a"], weights=[1.0, 2.0])
    assert StrategyParams(name="ensemble", ensemble=EnsembleParams(models=["a"])).models == ["a"]
    assert StrategyParams().models == []
