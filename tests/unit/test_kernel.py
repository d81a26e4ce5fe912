"""The kernel: one input to quiescence, verdicts as events, deterministic ids and bytes."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest

from foxhunt.core.kernel import Kernel, KernelError
from foxhunt.core.operator import OperatorError
from foxhunt.messages import codec
from foxhunt.messages.base import Input
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import QuoteTick
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderFilled,
    OrderReportRefused,
    OrderSubmitted,
    OrdersUncertain,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)
from foxhunt.messages.system import (
    AdminCommand,
    MarketDataFlagged,
    PositionChanged,
    TradingState,
    TradingStateChanged,
    VenueConnected,
    VenueDisconnected,
)
from tests.fakes import kernel, quote


def buy_once(size: str = "100000"):
    done = []

    def script(q, ctx):
        if not done:
            done.append(ctx.submit(q.symbol, Side.BUY, d(size)))

    return script


def test_quote_without_decision_derives_nothing():
    k, _ = kernel()
    step = k.handle(1, quote(10, "1.1", "1.1002"))
    assert list(step.derived) == [] and list(step.commands) == []


def test_order_request_becomes_command_and_verdict_with_ids_from_the_sequence_number():
    k, strategy = kernel(buy_once())
    step = k.handle(42, quote(10, "1.1", "1.1002"))
    cmd, verdict = step.derived
    assert isinstance(cmd, SubmitOrder) and cmd.order_id == "scripted-42-1"
    assert (cmd.ts_event, cmd.ts_init) == (10, 10)
    assert isinstance(verdict, OrderSubmitted) and list(step.commands) == [cmd]
    assert [type(e) for e in strategy.events] == [OrderSubmitted]


def test_gate_denial_is_an_event_with_reason_and_values_and_nothing_is_sent():
    k, _ = kernel(buy_once("2000000"), max_order_qty="1000000")
    step = k.handle(1, quote(10, "1.1", "1.1002"))
    denied = step.derived[-1]
    assert isinstance(denied, OrderDenied)
    assert denied.reason == "MAX_ORDER_QTY" and denied.detail == "qty=2000000 limit=1000000"
    assert list(step.commands) == []
    assert k.orders.get(denied.order_id).status.value == "DENIED"


def test_fill_updates_the_portfolio_and_derives_a_position_event():
    k, _ = kernel(buy_once())
    cmd = k.handle(1, quote(10, "1.1", "1.1002")).commands[0]
    k.handle(2, OrderAccepted(ts_event=11, ts_init=11, order_id=cmd.order_id, symbol="EURUSD", venue_order_id="v"))
    fill = OrderFilled(ts_event=12, ts_init=12, order_id=cmd.order_id, symbol="EURUSD", side=Side.BUY,
                       trade_id="t1", last_qty=d("100000"), last_price=d("1.1002"), leaves_qty=0,
                       commission=d("2.2"))
    (position,) = k.handle(3, fill).derived
    assert isinstance(position, PositionChanged)
    assert position.quantity == d("100000") and position.avg_price == d("1.1002")
    assert position.commissions == d("2.2")


def test_crossed_and_locked_quotes_are_flagged_and_not_traded_on():
    k, strategy = kernel(buy_once())
    for bid, ask, reason in (("1.1003", "1.1001", "crossed quote"), ("1.1", "1.1", "locked quote")):
        (flag,) = k.handle(1, quote(10, bid, ask)).derived
        assert isinstance(flag, MarketDataFlagged) and flag.reason == reason
    assert not k.orders.by_id and "EURUSD" not in k.market


def test_admin_halt_denies_new_orders_and_resume_allows_them():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000")))
    halt = AdminCommand(ts_event=1, ts_init=1, command="halt", operator="ops", reason="test")
    (changed,) = k.handle(1, halt).derived
    assert isinstance(changed, TradingStateChanged) and changed.state is TradingState.HALTED
    assert "admin halt by ops: test" == changed.cause
    assert k.handle(2, quote(10, "1.1", "1.1002")).derived[-1].reason == "TRADING_HALTED"
    k.handle(3, AdminCommand(ts_event=2, ts_init=2, command="resume", operator="ops"))
    assert isinstance(k.handle(4, quote(11, "1.1", "1.1002")).derived[-1], OrderSubmitted)


def test_kill_cancels_working_orders_and_halts():
    k, _ = kernel(buy_once())
    cmd = k.handle(1, quote(10, "1.1", "1.1002")).commands[0]
    step = k.handle(2, AdminCommand(ts_event=2, ts_init=2, command="kill", operator="ops"))
    assert [type(e).__name__ for e in step.derived] == ["TradingStateChanged", "CancelOrder"]  # halt first
    assert step.commands[0].order_id == cmd.order_id
    assert k.state is TradingState.HALTED


def test_a_venue_that_is_down_gets_no_orders_and_one_that_reconnects_may_ask_for_its_working_orders_canceled():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000")))
    working = k.handle(1, quote(10, "1.1", "1.1002")).commands[0]
    k.handle(2, OrderAccepted(ts_event=11, ts_init=11, order_id=working.order_id, symbol="EURUSD", venue_order_id="v"))
    (uncertain,) = k.handle(3, VenueDisconnected(ts_event=12, ts_init=12, venue="FIX", reason="connection lost")).derived
    assert isinstance(uncertain, OrdersUncertain) and uncertain.order_ids == [working.order_id]
    assert uncertain.reason == "venue FIX down: connection lost" and k.orders.get(working.order_id).uncertain
    denied = k.handle(4, quote(13, "1.1", "1.1002")).derived[-1]
    assert (denied.reason, denied.detail) == ("VENUE_DISCONNECTED", "FIX")
    # once uncertain, an order is not listed again by a second report of the same outage
    assert list(k.handle(5, VenueDisconnected(ts_event=13, ts_init=13, venue="FIX", reason="logout")).derived) == []
    assert list(k.handle(6, VenueConnected(ts_event=14, ts_init=14, venue="FIX")).derived) == []  # kept working
    assert not k.orders.get(working.order_id).uncertain and k.orders.get(working.order_id).is_open
    k.handle(7, VenueDisconnected(ts_event=15, ts_init=15, venue="FIX", reason="connection lost"))
    step = k.handle(8, VenueConnected(ts_event=16, ts_init=16, venue="FIX", cancel_working=True))
    (cancel,) = step.commands  # the order that was working; the denied one never was
    assert cancel.order_id == working.order_id and cancel.reason == "cancel_on_reconnect: venue FIX reconnected"
    assert list(step.derived) == [cancel]  # a journaled command, stamped with the reconnection
    assert (cancel.ts_event, cancel.ts_init) == (16, 16)


def test_a_cancel_while_the_venue_is_down_is_held_and_one_lost_with_the_connection_is_asked_again():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000")) if q.ts_event < 20 else None)
    held, lost, answered = (k.handle(i, quote(10 + i, "1.1", "1.1002")).commands[0] for i in (1, 2, 3))
    for i, cmd in enumerate((held, lost, answered), 4):
        k.handle(i, OrderAccepted(ts_event=20, ts_init=20, order_id=cmd.order_id, symbol="EURUSD", venue_order_id="v"))
    admin = lambda *args: AdminCommand(ts_event=30, ts_init=30, command="cancel", args=list(args), operator="ops")  # noqa: E731
    assert [c.order_id for c in k.handle(7, admin(lost.order_id, answered.order_id)).commands] == [
        lost.order_id, answered.order_id]  # sent; the connection drops before the first is answered
    k.handle(8, VenueDisconnected(ts_event=31, ts_init=31, venue="FIX", reason="connection lost"))
    step = k.handle(9, admin(held.order_id))
    assert list(step.commands) == []  # nothing goes to a venue that is down ...
    denied = step.derived[-1]
    assert isinstance(denied, OrderDenied) and denied.reason == "VENUE_DISCONNECTED"
    assert denied.detail == "FIX; held until it is back" and k.orders.get(held.order_id).is_open
    replace = ReplaceOrder(ts_event=32, ts_init=32, order_id=held.order_id, symbol="EURUSD", price=d("1.0"))
    k.requests.append(replace)  # (no strategy asks for replaces yet) not held: its terms may be stale by then
    assert [(type(e), getattr(e, "reason", None)) for e in k.handle(10, quote(32, "1.1", "1.1002")).derived] == [
        (ReplaceOrder, None), (OrderDenied, "VENUE_DISCONNECTED")]
    # reconciliation finds the second cancel done at the venue; the first was lost with the connection
    k.handle(11, OrderCanceled(ts_event=33, ts_init=33, order_id=answered.order_id, symbol="EURUSD", reason="r"))
    again = k.handle(12, VenueConnected(ts_event=34, ts_init=34, venue="FIX")).commands
    assert sorted(c.order_id for c in again) == sorted([held.order_id, lost.order_id])
    assert all(c.reason.endswith("(asked again: venue FIX is back)") for c in again)
    k.handle(13, OrderCancelRejected(ts_event=35, ts_init=35, order_id=lost.order_id, symbol="EURUSD", reason="late"))
    k.handle(14, OrderCancelRejected(ts_event=35, ts_init=35, order_id=held.order_id, symbol="EURUSD",
                                     reason="an earlier replace refused", replace=True))  # not the cancel's answer
    k.handle(15, VenueDisconnected(ts_event=36, ts_init=36, venue="FIX", reason="connection lost"))
    # the refused cancel is answered; the other one, unanswered again, is asked once more, for its reason
    (once_more,) = k.handle(16, VenueConnected(ts_event=37, ts_init=37, venue="FIX")).commands
    assert once_more.order_id == held.order_id
    assert once_more.reason == "admin cancel by ops (asked again: venue FIX is back)"  # not "again" twice


def test_a_report_the_orders_lifecycle_does_not_allow_is_refused_and_a_refused_fill_halts():
    """A counterparty's duplicate or contradicting report must not stop the kernel: it is journaled before
    the kernel sees it, so raising would end the daemon at every restart too."""
    k, _ = kernel(buy_once())
    (cmd,) = k.handle(1, quote(10, "1.1", "1.1002")).commands
    accepted = OrderAccepted(ts_event=11, ts_init=11, order_id=cmd.order_id, symbol="EURUSD", venue_order_id="v")
    k.handle(2, accepted)

    def fill(qty: str, **changes) -> OrderFilled:
        return OrderFilled(**{"ts_event": 12, "ts_init": 12, "order_id": cmd.order_id, "symbol": "EURUSD",
                              "side": Side.BUY, "trade_id": "t1", "last_qty": d(qty), "last_price": d("1.1002"),
                              "leaves_qty": 0, **changes})

    refusals = {
        "OrderAccepted not allowed for an order in ACCEPTED": accepted,
        "no such order (or one closed before the kernel's newest closed orders, which it forgot)": OrderCanceled(
            ts_event=12, ts_init=12, order_id="nope", symbol="EURUSD"),
        "symbol GBPUSD is not the order's EURUSD": OrderCanceled(ts_event=12, ts_init=12, order_id=cmd.order_id,
                                                                 symbol="GBPUSD"),
    }
    for seq, (reason, report) in enumerate(refusals.items(), 3):
        (refused,) = k.handle(seq, report).derived
        assert isinstance(refused, OrderReportRefused) and (refused.reason, refused.report) == (
            reason, type(report).__name__)
    assert k.orders.get(cmd.order_id).status.value == "ACCEPTED" and k.state is TradingState.ACTIVE
    # a fill it cannot apply: the position stays, and trading halts (the working order's cancel included)
    refused, halted, cancel = k.handle(6, fill("100001")).derived
    assert refused.reason == "fill of 100001 beyond the order's 100000 (0 filled)"
    assert isinstance(halted, TradingStateChanged) and halted.state is TradingState.HALTED
    assert halted.cause == f"fill t1 of order {cmd.order_id} refused: {refused.reason}"
    assert isinstance(cancel, CancelOrder) and cancel.order_id == cmd.order_id
    assert k.portfolio.positions == {} and k.orders.get(cmd.order_id).filled_qty == 0
    (wrong_side,) = k.handle(7, fill("100000", side=Side.SELL)).derived  # halted already: the refusal only
    assert wrong_side.reason == "fill side SELL is not the order's BUY"
    assert [type(e) for e in k.handle(8, fill("100000")).derived] == [PositionChanged]  # the fill that fits


def test_the_kernel_forgets_all_but_its_newest_closed_orders_and_refuses_a_late_report_for_one():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000"), OrderType.MARKET,
                                            time_in_force=TimeInForce.IOC) if not ctx.open_orders(q.symbol) else None)
    k.orders.closed_kept = 3
    ids, seq = [], 0
    for i in range(6):
        seq += 1
        (cmd,) = k.handle(seq, quote(10 + i, "1.1", "1.1002")).commands
        ids.append(cmd.order_id)
        seq += 1
        k.handle(seq, OrderCanceled(ts_event=10 + i, ts_init=10 + i, order_id=cmd.order_id, symbol="EURUSD"))
    assert list(k.orders.by_id) == ids[3:] and list(k.orders.closed) == ids[3:] and k.orders.count == 6
    late = OrderCancelRejected(ts_event=20, ts_init=20, order_id=ids[0], symbol="EURUSD", reason="too late")
    (refused,) = k.handle(seq + 1, late).derived  # a late answer for a forgotten order: refused, not a crash
    assert isinstance(refused, OrderReportRefused) and refused.reason.startswith("no such order")
    assert not k.handle(seq + 2, OrderCancelRejected(**{**msgspec.structs.asdict(late), "order_id": ids[5]})).derived
    summary = {"orders": k.orders.count, "denied": k.orders.denied}
    assert summary == {"orders": 6, "denied": 0}


def test_reducing_state_allows_only_orders_that_reduce():
    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.SELL, d("1000")))
    k.handle(1, AdminCommand(ts_event=1, ts_init=1, command="reduce"))
    assert k.handle(2, quote(10, "1.1", "1.1002")).derived[-1].reason == "TRADING_REDUCING"


def test_every_kind_of_input_has_a_handler():
    k, _ = kernel()
    inputs = {t for t in codec.MESSAGE_TYPES if issubclass(t, Input)}
    assert inputs <= set(k._handlers), sorted(t.__name__ for t in inputs - set(k._handlers))


def test_unknown_input_or_admin_command_is_a_bug():
    k, _ = kernel()
    with pytest.raises(KernelError, match="does not handle"):
        k.handle(1, OrderSubmitted(ts_event=1, ts_init=1, order_id="x", symbol="EURUSD"))
    with pytest.raises(OperatorError, match="unknown admin command 'dance'"):
        k.handle(1, AdminCommand(ts_event=1, ts_init=1, command="dance"))


def test_a_strategy_that_never_stops_asking_is_stopped():
    def greedy_forever(q, ctx):
        ctx.submit(q.symbol, Side.BUY, d("1000"))

    k, strategy = kernel(greedy_forever)
    strategy.on_order_event = lambda event, order, ctx: ctx.submit("EURUSD", Side.BUY, d("1000"))
    with pytest.raises(KernelError, match="still produced requests"):
        k.handle(1, quote(10, "1.1", "1.1002"))


def test_same_inputs_give_byte_identical_outputs():
    from foxhunt.adapters.feeds.synthetic import SyntheticFeed
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.core.strategies import StrategyParams, build_strategy
    from tests.fakes import INSTRUMENTS, Clock

    def run() -> list[bytes]:
        k = Kernel(INSTRUMENTS, [build_strategy(StrategyParams())], PreTradeGate(RiskLimits(), INSTRUMENTS))
        out = []
        for seq, q in enumerate(SyntheticFeed(3, 5000, INSTRUMENTS["EURUSD"], d("1.1"), Clock()), 1):
            out.extend(codec.encode(e) for e in k.handle(seq, q).derived)
        return out

    first = run()
    assert first and first == run()


def test_a_journal_outage_halts_trading_and_recovery_restores_the_previous_state():
    from foxhunt.messages.system import JournalDegraded, JournalRecovered

    k, _ = kernel(lambda q, ctx: ctx.submit(q.symbol, Side.BUY, d("1000")))
    (halt,) = k.handle(1, JournalDegraded(ts_event=1, ts_init=1, reason="connection lost")).derived
    assert halt.state is TradingState.HALTED and halt.cause == "journal fail-stop: connection lost"
    assert k.handle(2, quote(10, "1.1", "1.1002")).derived[-1].reason == "TRADING_HALTED"
    (resumed,) = k.handle(3, JournalRecovered(ts_event=2, ts_init=2, outage_ns=3_500_000_000)).derived
    assert resumed.state is TradingState.ACTIVE and resumed.cause == "journal recovered after 3500 ms"


def test_an_operator_halt_during_a_journal_outage_outlasts_the_recovery():
    from foxhunt.messages.system import JournalDegraded, JournalRecovered

    k, _ = kernel()
    k.handle(1, JournalDegraded(ts_event=1, ts_init=1, reason="stalled"))
    k.handle(2, AdminCommand(ts_event=2, ts_init=2, command="halt", operator="ops"))
    assert list(k.handle(3, JournalRecovered(ts_event=3, ts_init=3, outage_ns=1)).derived) == []
    assert k.state is TradingState.HALTED


def test_a_limit_changed_by_an_operator_applies_from_that_point_and_a_bad_one_is_rejected():
    k, _ = kernel(buy_once("2000000"), max_order_qty="1000000")
    cmd = AdminCommand(ts_event=1, ts_init=1, command="limit", args=["set", "max_order_qty", "3000000"],
                       operator="ops", reason="bigger tickets today")
    (changed,) = k.handle(1, cmd).derived
    assert (changed.name, changed.previous, changed.value) == ("max_order_qty", "1000000", "3000000")
    assert changed.cause == "admin limit by ops: bigger tickets today"
    assert isinstance(k.handle(2, quote(10, "1.1", "1.1002")).derived[-1], OrderSubmitted)
    bad = AdminCommand(ts_event=2, ts_init=2, command="limit", args=["set", "collar_bps", "wide"])
    (rejected,) = k.handle(3, bad).derived
    assert type(rejected).__name__ == "CommandRejected" and "collar_bps" in rejected.reason


def test_equity_breakers_trip_once_and_wait_for_the_next_day_after_an_operator_resumes():
    from foxhunt.core.risk.breakers import DAY_NS
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.orders import OrderFilled
    from tests.fakes import INSTRUMENTS

    limits = RiskLimits(max_daily_loss=Decimal("100"), breaker_action="reduce")
    k = Kernel(INSTRUMENTS, [], PreTradeGate(limits, INSTRUMENTS))
    k.handle(1, quote(10, "1.09990", "1.10010"))
    k.requests.append(SubmitOrder(ts_event=10, ts_init=10, order_id="b", strategy_id="s", symbol="EURUSD",
                                  side=Side.BUY, order_type=OrderType.MARKET, quantity=d("100000")))
    k.handle(2, quote(10, "1.09990", "1.10010"))
    k.handle(3, OrderFilled(ts_event=11, ts_init=11, order_id="b", symbol="EURUSD", side=Side.BUY, trade_id="t",
                            last_qty=d("100000"), last_price=d("1.10000"), leaves_qty=0))
    assert list(k.handle(4, quote(12, "1.09890", "1.09910")).derived) == []  # down exactly 100: at the limit
    (tripped,) = k.handle(5, quote(13, "1.09898", "1.09900")).derived  # mid 1.09899: down 101
    assert tripped.state is TradingState.REDUCING and tripped.cause == "breaker daily loss: loss=101 limit=100"
    k.handle(6, AdminCommand(ts_event=14, ts_init=14, command="resume", operator="ops"))
    assert list(k.handle(7, quote(15, "1.09000", "1.09020")).derived) == []  # acknowledged for today
    (next_day,) = k.handle(8, quote(DAY_NS + 1, "1.07000", "1.07020")).derived[:1] or (None,)
    assert next_day is None  # a new day starts from the equity of its first mark


def test_repeated_executions_halt_trading():
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.orders import OrderPartiallyFilled
    from tests.fakes import INSTRUMENTS

    k = Kernel(INSTRUMENTS, [], PreTradeGate(RiskLimits(max_repeated_executions=3), INSTRUMENTS))
    k.handle(1, quote(10, "1.09990", "1.10010"))
    k.requests.append(SubmitOrder(ts_event=10, ts_init=10, order_id="b", strategy_id="s", symbol="EURUSD",
                                  side=Side.BUY, order_type=OrderType.MARKET, quantity=d("10000")))
    k.handle(2, quote(10, "1.09990", "1.10010"))
    steps = [k.handle(3 + i, OrderPartiallyFilled(ts_event=20 + i, ts_init=0, order_id="b", symbol="EURUSD",
                                                  side=Side.BUY, trade_id=f"t{i}", last_qty=d("1000"),
                                                  last_price=d("1.1"), leaves_qty=d(str(9000 - 1000 * i))))
             for i in range(3)]
    (halted,) = [e for e in steps[2].derived if isinstance(e, TradingStateChanged)]
    assert halted.state is TradingState.HALTED
    assert halted.cause == "repeated executions: 3 fills of EURUSD BUY within 1000 ms"


def test_a_breaker_halt_is_the_kill_switch_and_cancels_working_orders():
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.orders import OrderPartiallyFilled
    from tests.fakes import INSTRUMENTS

    k = Kernel(INSTRUMENTS, [], PreTradeGate(RiskLimits(max_repeated_executions=1), INSTRUMENTS))
    k.handle(1, quote(10, "1.09990", "1.10010"))
    k.requests.append(SubmitOrder(ts_event=10, ts_init=10, order_id="b", strategy_id="s", symbol="EURUSD",
                                  side=Side.BUY, order_type=OrderType.MARKET, quantity=d("10000")))
    k.handle(2, quote(10, "1.09990", "1.10010"))
    step = k.handle(3, OrderPartiallyFilled(ts_event=20, ts_init=0, order_id="b", symbol="EURUSD", side=Side.BUY,
                                            trade_id="t", last_qty=d("1000"), last_price=d("1.1"), leaves_qty=d("9000")))
    assert [type(e).__name__ for e in step.derived] == ["PositionChanged", "TradingStateChanged", "CancelOrder"]
    assert step.commands[0].reason.startswith("kill switch: repeated executions")


def test_the_volatility_breaker_pauses_an_instrument_and_resumes_it_when_calm():
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.system import InstrumentStateChanged
    from tests.fakes import INSTRUMENTS

    limits = RiskLimits(max_realized_vol_bps=50, vol_window=4, vol_sample_ms=1000)
    k = Kernel(INSTRUMENTS, [], PreTradeGate(limits, INSTRUMENTS))
    second = 1_000_000_000
    events = []
    mids = ["1.1000", "1.1000", "1.1000", "1.1000", "1.1000", "1.1110", "1.0990", "1.1110", "1.0990"]  # ~1% swings
    for t, mid in enumerate(mids):
        events += k.handle(t + 1, quote(t * second, f"{float(mid) - 0.0001:.5f}", f"{float(mid) + 0.0001:.5f}")).derived
    (paused,) = [e for e in events if isinstance(e, InstrumentStateChanged)]
    assert paused.paused and paused.cause.startswith("volatility breaker: realised_vol_bps=")
    cmd = SubmitOrder(ts_event=9 * second, ts_init=0, order_id="x", strategy_id="t", symbol="EURUSD", side=Side.BUY,
                      order_type=OrderType.MARKET, quantity=d("1000"))
    assert k.gate.check_submit(cmd, k).reason == "VOLATILITY_PAUSE"
    calm = []
    for t in range(9, 16):
        calm += k.handle(t + 10, quote(t * second, "1.09890", "1.09910")).derived
    (resumed,) = [e for e in calm if isinstance(e, InstrumentStateChanged)]
    assert not resumed.paused
    assert k.gate.check_submit(cmd, k) is None


def test_market_wide_halts_by_level_and_resume_by_themselves_only_below_level_three():
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.market import Instrument

    instruments = {"SPX": Instrument(symbol="SPX", tick_size=d("0.01"), lot_size=d("1"), currency="USD")}
    k = Kernel(instruments, [], PreTradeGate(RiskLimits(market_index="SPX", market_halt_minutes=15), instruments))
    minute = 60_000_000_000

    def at(t: int, mid: str) -> list:
        m = d(mid)
        return list(k.handle(t + 1, QuoteTick(ts_event=t * minute, ts_init=t * minute, symbol="SPX",
                                              bid=m - d("0.01"), ask=m + d("0.01"))).derived)

    assert at(0, "5000") == []
    (halt,) = at(1, "4650")  # down 7%
    assert halt.state is TradingState.HALTED and halt.cause.startswith("market-wide halt level 1: SPX down 7.00%")
    assert at(10, "4640") == []  # still halted, level 1 trips once a day
    (resumed,) = at(16, "4640")
    assert resumed.state is TradingState.ACTIVE and resumed.cause == "market-wide halt ended"
    (level3,) = [e for e in at(20, "3990") if isinstance(e, TradingStateChanged)]  # down 20.2%: level 3
    assert level3.cause.startswith("market-wide halt level 3")
    assert at(200, "4000") == [] and k.state is TradingState.HALTED  # only an operator resumes


def test_a_market_index_that_is_not_an_instrument_is_a_config_error():
    from foxhunt import config
    from foxhunt.errors import ConfigError
    from foxhunt.runtime.recovery import build_kernel

    trading = config.load(None, env={"FOXHUNT_RISK__MARKET_INDEX": "SPX"}).trading()
    with pytest.raises(ConfigError, match=r"\[risk\]: market_index 'SPX' is not a configured instrument"):
        build_kernel(trading)


def test_price_bands_deny_orders_outside_and_pause_an_instrument_that_stays_outside():
    from foxhunt.core.risk.gate import PreTradeGate
    from foxhunt.core.risk.limits import RiskLimits
    from foxhunt.messages.market import Instrument

    instruments = {"ACME": Instrument(symbol="ACME", tick_size=d("0.01"), lot_size=d("1"), currency="USD")}
    limits = RiskLimits(band_tier=1, band_pause_seconds=15, band_pause_minutes=5, band_utc_offset_minutes=0,
                        collar_bps=None)
    k = Kernel(instruments, [], PreTradeGate(limits, instruments))
    noon = 12 * 3_600_000_000_000
    second = 1_000_000_000

    def at(t: int, mid: str) -> list:
        m = d(mid)
        return [e for e in k.handle(t + 1, QuoteTick(ts_event=noon + t * second, ts_init=0, symbol="ACME",
                                                       bid=m - d("0.01"), ask=m + d("0.01"))).derived]

    def order(price: str) -> str:
        cmd = SubmitOrder(ts_event=k.ts_event, ts_init=0, order_id=f"o{price}{k.seq}", strategy_id="t", symbol="ACME",
                          side=Side.BUY, order_type=OrderType.LIMIT, quantity=d("1"), price=d(price))
        denial = k.gate.check_submit(cmd, k)
        return "OK" if denial is None else f"{denial.reason}: {denial.detail}"

    for t in range(10):
        at(t, "100.00")
    assert order("105.00") == "OK"  # the 5% band of tier 1 at midday: 95-105
    assert order("105.01") == "PRICE_OUTSIDE_BAND: price=105.01 band=95-105"
    assert at(10, "110.00") == [] and at(20, "110.00") == []  # outside for 10 s: a limit state, no pause
    (paused,) = at(25, "110.00")  # 15 s outside (the rolling reference has only risen to ~102)
    assert paused.paused and paused.cause.startswith("price band: 110 outside")
    assert order("100.00").startswith("PRICE_BAND_PAUSE")
    (resumed,) = at(25 + 300, "100.00")
    assert not resumed.paused and order("100.00") == "OK"
