"""Operator commands and configuration reloads in the kernel: each applies where it stands in the stream,
with its operator and reason in the events it derives, and one that cannot apply is recorded as rejected."""

from __future__ import annotations

from decimal import Decimal

import msgspec

from foxhunt.core.risk.limits import RiskLimits
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import CancelOrder, OrderFilled, OrderSubmitted, Side, SubmitOrder
from foxhunt.messages.system import (
    AdminCommand,
    CommandRejected,
    ConfigReloaded,
    RiskLimitChanged,
    StrategyStateChanged,
    TradingState,
)
from tests.fakes import kernel, quote


def admin(ts: int, command: str, *args: str, reason: str = "test") -> AdminCommand:
    return AdminCommand(ts_event=ts, ts_init=ts, command=command, args=list(args), operator_uid=1000,
                        operator="alice", reason=reason)


def fill(k, order_id: str, ts: int, price: str = "1.1001") -> None:
    order = k.orders.get(order_id)
    k.handle(ts, OrderFilled(ts_event=ts, ts_init=ts, order_id=order_id, symbol=order.symbol, side=order.side,
                             last_qty=order.quantity, last_price=d(price), leaves_qty=0,
                             commission=0, trade_id=f"T{ts}"))


def long_position(size: str = "100000"):
    """A kernel whose strategy bought `size` once, filled, and which holds a second working buy."""
    bought: list[str] = []

    def script(q, ctx):
        if len(bought) < 2:
            bought.append(ctx.submit(q.symbol, Side.BUY, d(size)))

    k, _ = kernel(script)
    k.handle(1, quote(10, "1.1", "1.1002"))
    fill(k, bought[0], 2)
    k.handle(3, quote(11, "1.1", "1.1002"))
    return k, bought


def test_flatten_cancels_working_orders_and_closes_the_position_with_a_reduce_only_market_order():
    k, bought = long_position()
    step = k.handle(4, admin(12, "flatten", "EURUSD", reason="end of day"))
    kinds = [type(e).__name__ for e in step.derived]
    assert kinds == ["CancelOrder", "SubmitOrder", "OrderSubmitted"]
    cancel, submit = step.derived[0], step.derived[1]
    assert isinstance(cancel, CancelOrder) and cancel.order_id == bought[1] and "alice" in cancel.reason
    assert isinstance(submit, SubmitOrder) and submit.side is Side.SELL and submit.quantity == d("100000")
    assert submit.reduce_only and submit.strategy_id == "admin" and submit.order_id == "admin-4-1"
    assert [c.order_id for c in step.commands] == [bought[1], "admin-4-1"]


def test_flatten_in_halted_is_denied_by_the_gate_like_any_order():
    k, _ = long_position()
    k.handle(4, admin(12, "halt"))
    step = k.handle(5, admin(13, "flatten"))
    assert step.derived[-1].reason == "TRADING_HALTED"


def test_flatten_of_an_unknown_instrument_is_rejected_and_changes_nothing():
    k, _ = long_position()
    (rejected,) = k.handle(4, admin(12, "flatten", "XAUUSD")).derived
    assert isinstance(rejected, CommandRejected) and "no such instrument: XAUUSD" in rejected.reason
    assert len(k.orders.open) == 1


def test_a_paused_strategy_asks_for_nothing_until_resumed():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000")))
    (paused,) = k.handle(1, admin(1, "strategy", "pause", "scripted", reason="misbehaving")).derived
    assert isinstance(paused, StrategyStateChanged) and paused.paused
    assert paused.cause == "admin strategy pause by alice: misbehaving"
    assert list(k.handle(2, quote(10, "1.1", "1.1002")).derived) == []
    k.handle(3, admin(11, "strategy", "resume", "scripted"))
    assert isinstance(k.handle(4, quote(12, "1.1", "1.1002")).derived[-1], OrderSubmitted)


def test_pausing_an_unknown_or_already_paused_strategy_is_rejected():
    k, _ = kernel()
    (unknown,) = k.handle(1, admin(1, "strategy", "pause", "nope")).derived
    assert "no strategy named 'nope'" in unknown.reason
    k.handle(2, admin(2, "strategy", "pause", "scripted"))
    (again,) = k.handle(3, admin(3, "strategy", "pause", "scripted")).derived
    assert isinstance(again, CommandRejected) and "already paused" in again.reason


def test_cancel_of_an_unknown_order_is_rejected_not_a_crash():
    k, _ = long_position()
    (rejected,) = k.handle(4, admin(12, "cancel", "scripted-99-1")).derived
    assert isinstance(rejected, CommandRejected) and rejected.reason == "no such order: scripted-99-1"


def test_a_reloaded_configuration_changes_the_limits_where_it_stands():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("500000")))
    assert isinstance(k.handle(1, quote(10, "1.1", "1.1002")).derived[-1], OrderSubmitted)
    limits = RiskLimits(max_order_qty=Decimal("100000"), collar_bps=400)
    reload = ConfigReloaded(ts_event=11, ts_init=11, source="/etc/foxhunt/foxhunt.toml",
                            risk=msgspec.json.encode(limits), changed=["collar_bps", "max_order_qty"])
    changes = k.handle(2, reload).derived
    assert [(c.name, c.previous, c.value) for c in changes] == [
        ("collar_bps", "500", "400"), ("max_order_qty", "1000000", "100000")]
    assert all(isinstance(c, RiskLimitChanged) and "/etc/foxhunt/foxhunt.toml" in c.cause for c in changes)
    assert k.handle(3, quote(12, "1.1", "1.1002")).derived[-1].reason == "MAX_ORDER_QTY"
    assert k.state is TradingState.ACTIVE
