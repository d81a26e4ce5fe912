"""Portfolio arithmetic against hand computations (all values in nanos via parse_fixed)."""

from __future__ import annotations

from foxhunt.core.portfolio import Portfolio, Position
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import Side


def test_round_trip_long_realises_the_price_difference_minus_commissions():
    p = Portfolio()
    pos = p.open_position("EURUSD", "USD", 1)
    p.apply_fill(pos, Side.BUY, d("100000"), d("1.10000"), d("2.2"))
    assert (pos.quantity, pos.avg_price, pos.cost) == (d("100000"), d("1.1"), d("110000"))
    p.apply_fill(pos, Side.SELL, d("100000"), d("1.10050"), d("2.201"))
    # (1.10050 - 1.10000) * 100000 = 50
    assert pos.quantity == 0 and pos.cost == 0
    assert pos.realized_pnl == d("50")
    assert pos.commissions == d("4.401")
    assert pos.cash == d("50") - d("4.401")
    assert p.equity == d("45.599")


def test_adding_averages_the_entry_price():
    pos = Position("X", "USD")
    pos.apply_fill(Side.BUY, d("100"), d("10"), 0)
    pos.apply_fill(Side.BUY, d("300"), d("14"), 0)
    assert pos.avg_price == d("13")  # (100*10 + 300*14) / 400
    pos.apply_fill(Side.SELL, d("200"), d("15"), 0)
    assert pos.realized_pnl == d("400")  # 200 * (15 - 13)
    assert (pos.quantity, pos.avg_price) == (d("200"), d("13"))


def test_short_position_and_flip_through_zero():
    pos = Position("X", "USD")
    pos.apply_fill(Side.SELL, d("100"), d("20"), 0)
    assert (pos.quantity, pos.cost, pos.avg_price) == (-d("100"), -d("2000"), d("20"))
    pos.apply_fill(Side.BUY, d("150"), d("18"), 0)  # closes 100 at +2 each, opens 50 long at 18
    assert pos.realized_pnl == d("200")
    assert (pos.quantity, pos.avg_price) == (d("50"), d("18"))


def test_partial_closes_never_leak_cost_basis_when_shares_do_not_divide():
    pos = Position("X", "USD")
    pos.apply_fill(Side.BUY, d("3"), d("1.000000001"), 0)
    for _ in range(3):
        pos.apply_fill(Side.SELL, d("1"), d("1.000000001"), 0)
    assert pos.quantity == 0 and pos.cost == 0 and pos.realized_pnl == 0


def test_multiplier_scales_value_and_unrealised_pnl_marks_to_market():
    p = Portfolio()
    pos = p.open_position("ES", "USD", 50)
    p.apply_fill(pos, Side.BUY, d("2"), d("5000"), 0)
    p.mark("ES", d("5010"))
    assert pos.unrealized_pnl == d("1000")  # 2 contracts * 10 points * 50
    p.mark("ES", d("4990"))
    assert p.equity == -d("1000")
    assert p.peak_equity == d("1000") and p.max_drawdown == d("2000")
