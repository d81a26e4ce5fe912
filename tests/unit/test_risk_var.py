"""The portfolio gate: VaR and ES of the book after an order, kept incrementally, against foxhunt.risk."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from foxhunt import risk
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.risk.var import BookVar
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import OrderType, Side, SubmitOrder
from tests.fakes import INSTRUMENTS, quote

MIN = 60_000_000_000


def test_book_var_after_an_order_equals_historical_var_of_the_scenario_pnl():
    prices = np.array([[1.10, 150.0]]) * np.cumprod(1 + np.random.default_rng(3).normal(0, 0.002, (41, 2)), axis=0)
    book = BookVar(["EURUSD", "USDJPY"], window=40, sample_ns=MIN, confidence=0.95)
    for t, (eur, jpy) in enumerate(prices):
        book.on_mark("EURUSD", eur, t * MIN + 1)
        book.on_mark("USDJPY", jpy, t * MIN + 2)
    book.on_mark("EURUSD", prices[-1, 0], 41 * MIN + 1)  # the first mark past the boundary closes the period
    book.on_position("USDJPY", -50_000.0)
    returns = prices[1:] / prices[:-1] - 1
    var_b, es_b, var_a, es_a, k = book.check("EURUSD", 100_000.0)
    book_pnl = -50_000.0 * prices[-1, 1] * returns[:, 1]
    after_pnl = book_pnl + 100_000.0 * prices[-1, 0] * returns[:, 0]
    assert k == 2
    assert var_b == pytest.approx(risk.var_historical(book_pnl, 0.95))
    assert es_b == pytest.approx(risk.expected_shortfall(book_pnl, 0.95))
    assert var_a == pytest.approx(risk.var_historical(after_pnl, 0.95))
    assert es_a == pytest.approx(risk.expected_shortfall(after_pnl, 0.95))


def submit(k: Kernel, qty: str, side: Side = Side.BUY) -> str:
    cmd = SubmitOrder(ts_event=k.ts_event, ts_init=0, order_id="o", strategy_id="t", symbol="EURUSD", side=side,
                      order_type=OrderType.MARKET, quantity=d(qty))
    denial = k.gate.check_submit(cmd, k)
    return "OK" if denial is None else f"{denial.reason}: {denial.detail}"


def test_the_gate_waits_for_history_then_denies_what_breaches_and_passes_what_reduces():
    gate = PreTradeGate(RiskLimits(max_var=Decimal(500), var_window=20, var_confidence=0.9, collar_bps=None,
                                   max_orders_per_window=None, max_messages_per_second=None), INSTRUMENTS)
    k = Kernel(INSTRUMENTS, [], gate)
    k.handle(1, quote(0, "1.09990", "1.10010"))
    assert submit(k, "1000") == "VAR_HISTORY_SHORT: scenarios=0 confidence=0.9"
    mids = 1.1 * np.cumprod(1 + np.random.default_rng(5).normal(0, 0.003, 25))
    for t, mid in enumerate(mids, 1):
        k.handle(1 + t, quote(t * MIN + 1, f"{mid - 0.0001:.5f}", f"{mid + 0.0001:.5f}"))
    assert gate.book_var.used == 20
    assert submit(k, "10000") == "OK"  # VaR of 10,000 units: tens of dollars
    assert submit(k, "1000000").startswith("MAX_VAR: var=")
    gate.on_position("EURUSD", d("1000000"))  # the book already holds a million
    assert submit(k, "1000000", Side.SELL) == "OK"  # halving it lowers the VaR: it passes
