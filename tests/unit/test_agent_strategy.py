"""The agent strategy and the kernel's handling of a policy's decision, on fakes: a PolicyActed checked
before any strategy sees it, the target a fraction of trade size in whole lots, pursued through the gate
until reached, only towards flat while REDUCING, and another policy's decision ignored where one is named."""

from __future__ import annotations

import math
from decimal import Decimal

import msgspec
import pytest

from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategies import AgentParams
from foxhunt.core.strategies.agent import Agent
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import OrderDenied, OrderFilled, Side, SubmitOrder
from foxhunt.messages.scores import PolicyActed, ScoreRefused
from foxhunt.messages.system import TradingState, TradingStateChanged
from tests.fakes import INSTRUMENTS, quote


def agent(policy: str = "", max_order_qty: str = "1000000") -> Kernel:
    gate = PreTradeGate(RiskLimits(max_order_qty=Decimal(max_order_qty)), INSTRUMENTS)
    k = Kernel(INSTRUMENTS, [Agent(AgentParams(trade_size=Decimal("100000"), policy=policy))], gate)
    k.handle(1, quote(1, "1.1", "1.1002"))
    return k


def acted(fraction: float, policy: str = "p", as_of: int = 1, symbol: str = "EURUSD") -> PolicyActed:
    return PolicyActed(ts_event=as_of, ts_init=as_of + 1, policy_id=policy, symbol=symbol, as_of=as_of,
                       action=fraction, fraction=fraction)


def orders(step) -> list[SubmitOrder]:
    return [e for e in step.derived if type(e) is SubmitOrder]


def fill(k: Kernel, seq: int, order: SubmitOrder) -> None:
    k.handle(seq, OrderFilled(ts_event=seq, ts_init=seq, order_id=order.order_id, symbol=order.symbol,
                              side=order.side, last_qty=order.quantity, last_price=d("1.1001"), leaves_qty=0,
                              trade_id=f"t{seq}"))


def test_a_fraction_sets_a_target_in_whole_lots_towards_zero():
    k = agent()
    (order,) = orders(k.handle(2, acted(0.33333)))  # 33333 units: 33 lots of 1000
    assert order.side is Side.BUY and order.quantity == d("33000") and order.reduce_only is False
    fill(k, 3, order)
    (order,) = orders(k.handle(4, acted(-0.5)))
    assert order.side is Side.SELL and order.quantity == d("83000")  # from +33000 to -50000


def test_a_denied_target_is_not_asked_for_again_with_each_quote_but_a_new_target_is():
    k = agent(max_order_qty="50000")
    step = k.handle(2, acted(1.0))
    assert [type(e).__name__ for e in step.derived] == ["SubmitOrder", "OrderDenied"]
    assert next(e for e in step.derived if type(e) is OrderDenied).reason == "MAX_ORDER_QTY"
    assert orders(k.handle(3, quote(3, "1.1", "1.1002"))) == []  # denied, and nothing it depended on changed
    (order,) = orders(k.handle(4, acted(0.5, as_of=3)))
    assert order.quantity == d("50000") and k.strategies[0].targets == {"EURUSD": d("50000")}


def test_while_reducing_the_agent_only_goes_towards_flat():
    k = agent()
    (order,) = orders(k.handle(2, acted(1.0)))
    fill(k, 3, order)
    step = k.handle(4, acted(math.nan))  # refused: trading tightens to REDUCING
    assert [type(e).__name__ for e in step.derived] == ["ScoreRefused", "TradingStateChanged"]
    (order,) = orders(k.handle(5, acted(-1.0)))
    assert order.side is Side.SELL and order.quantity == d("100000") and order.reduce_only


@pytest.mark.parametrize(("change", "why"), [
    ({"symbol": "XAUUSD"}, "'XAUUSD' is not a configured instrument"),
    ({"fraction": 1.5}, "fraction 1.5 is not a number in [-1, 1]"),
    ({"fraction": math.nan}, "fraction nan is not a number"),
    ({"fraction": -math.inf}, "fraction -inf is not a number"),
])
def test_an_unusable_decision_is_refused_and_tightens_trading_to_reducing(change, why):
    k = agent()
    step = k.handle(2, msgspec.structs.replace(acted(0.5), **change))
    refused, changed = step.derived
    assert isinstance(refused, ScoreRefused) and why in refused.reason and refused.model_id == "p"
    assert isinstance(changed, TradingStateChanged) and changed.state is TradingState.REDUCING
    assert not step.commands


def test_a_strategy_that_follows_one_policy_ignores_another():
    k = agent(policy="mine")
    assert orders(k.handle(2, acted(1.0, policy="theirs"))) == []
    assert len(orders(k.handle(3, acted(1.0, policy="mine")))) == 1
