"""A venue's execution is booked once, by the kernel, from its own state: repeats and resends (before or
after a restart), reconciliations that overlap live reports, and reports out of order all add up to the
venue's CumQty; an overfill leaves the order cancellable; an unusable execution report tightens trading."""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.core.kernel import Kernel
from foxhunt.messages.base import Input
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    CommissionReported,
    DuplicateFillIgnored,
    OrderAccepted,
    OrderCanceled,
    OrderFilled,
    OrderPartiallyFilled,
    OrderReportRefused,
    OrderType,
    Side,
)
from foxhunt.messages.system import (
    PositionChanged,
    TradingState,
    TradingStateChanged,
    VenueMessageRejected,
)
from foxhunt.runtime import snapshots
from tests.fakes import kernel, quote

QTY = d("100000")


def working_order(quantity: str = "100000") -> tuple[Kernel, str, list[Input], Callable[[], Kernel]]:
    """A kernel with one acknowledged buy order of `quantity`, the inputs that made it, and how to build
    another kernel like it (as a restarted daemon does, before recovery feeds it the journal)."""
    def build() -> Kernel:
        done: list[str] = []

        def script(q, ctx):
            if not done:
                done.append(ctx.submit(q.symbol, Side.BUY, d(quantity), OrderType.LIMIT, price=d("1.1")))

        return kernel(script)[0]

    k = build()
    inputs: list[Input] = [quote(10, "1.1", "1.1002")]
    order_id = k.handle(1, inputs[0]).commands[0].order_id
    inputs.append(OrderAccepted(ts_event=11, ts_init=11, order_id=order_id, symbol="EURUSD", venue_order_id="X1"))
    k.handle(2, inputs[1])
    return k, order_id, inputs, build


def fill(order_id: str, trade_id: str, last: int, cum: int | None, quantity: int = QTY, ts: int = 20):
    cls = OrderFilled if cum == quantity else OrderPartiallyFilled
    return cls(ts_event=ts, ts_init=ts, order_id=order_id, symbol="EURUSD", side=Side.BUY, trade_id=trade_id,
               last_qty=last, last_price=d("1.1"), leaves_qty=quantity - (cum or 0), cum_qty=cum)


def position(k: Kernel) -> int:
    return k.portfolio.positions["EURUSD"].quantity if "EURUSD" in k.portfolio.positions else 0


def test_a_repeated_execution_is_recorded_as_a_duplicate_and_changes_nothing():
    k, oid, _, _ = working_order()
    k.handle(3, fill(oid, "EP1", d("50000"), d("50000")))
    step = k.handle(4, fill(oid, "EP1", d("50000"), d("50000")))
    (dup,) = step.derived
    assert isinstance(dup, DuplicateFillIgnored) and (dup.trade_id, dup.reason) == ("EP1", "execution EP1 is booked already")
    assert position(k) == d("50000") and k.state is TradingState.ACTIVE and k.orders.get(oid).filled_qty == d("50000")


def test_a_resend_after_a_restart_finds_the_execution_in_the_kernel_state_rebuilt_from_the_journal():
    """The defect: the daemon restarted, reconciliation found CumQty 50,000, then the venue resent EP1 with
    PossDupFlag=Y, and the position went from 50,000 to 100,000."""
    k, oid, inputs, build = working_order()
    inputs.append(fill(oid, "EP1", d("50000"), d("50000")))
    k.handle(3, inputs[-1])
    restarted = build()  # a new process: recovery feeds the journal's inputs to a fresh kernel
    for seq, msg in enumerate(inputs, 1):
        restarted.handle(seq, msg)
    restored = build()  # or restores a snapshot: the orders as the snapshot's pickler carries them
    buffer = io.BytesIO()
    snapshots._Pickler(buffer, protocol=5).dump(k.orders)
    restored.orders = pickle.loads(buffer.getvalue())
    assert restored.orders.get(oid).executions == {"EP1": (d("50000"), d("50000"), 0)}
    for again in (restarted, restored):
        status = fill(oid, "", 0, d("50000"), ts=30)  # the reconciliation: nothing missed
        assert isinstance(again.handle(10, status).derived[0], DuplicateFillIgnored)
        (dup,) = again.handle(11, fill(oid, "EP1", d("50000"), d("50000"), ts=31)).derived  # the resend
        assert isinstance(dup, DuplicateFillIgnored)
        assert again.orders.get(oid).filled_qty == d("50000") and again.state is TradingState.ACTIVE
    assert position(restarted) == d("50000")


def test_a_reconciliation_books_what_it_missed_and_the_executions_resent_after_it_add_nothing():
    k, oid, _, _ = working_order()
    k.handle(3, fill(oid, "E1", d("30000"), d("30000")))
    # the status says 60,000: E2 was missed while the connection was down
    (pos, *_) = k.handle(4, fill(oid, "", d("30000"), d("60000"))).derived
    assert isinstance(pos, PositionChanged) and pos.quantity == d("60000")
    (resent,) = k.handle(5, fill(oid, "E2", d("30000"), d("60000"))).derived
    assert isinstance(resent, DuplicateFillIgnored)
    assert resent.reason == "execution E2 (CumQty 60000) is within the CumQty 60000 a reconciliation booked"
    (again,) = k.handle(6, fill(oid, "E1", d("30000"), d("30000"))).derived
    assert isinstance(again, DuplicateFillIgnored) and again.reason == "execution E1 is booked already"
    k.handle(8, fill(oid, "E3", d("40000"), QTY))
    assert position(k) == QTY and k.orders.get(oid).status.value == "FILLED"


def test_a_reconciliation_counted_on_a_stale_filled_quantity_books_only_what_is_new():
    """The adapter asked the status while E2's report was on its way to the kernel: its fill says 60,000
    missed, of which E2's 30,000 the kernel has booked by then."""
    k, oid, _, _ = working_order()
    k.handle(3, fill(oid, "E1", d("30000"), d("30000")))
    k.handle(4, fill(oid, "E2", d("30000"), d("60000")))
    (pos, *_) = k.handle(5, fill(oid, "", d("60000"), d("90000"))).derived  # it counted on 30,000 filled
    assert pos.quantity == d("90000") and k.orders.get(oid).covered_qty == d("90000")


def test_reports_out_of_order_add_up_and_the_order_fills_once_all_of_it_is_booked():
    k, oid, _, _ = working_order()
    k.handle(3, fill(oid, "E3", d("40000"), QTY))  # the last execution first: 60,000 still to come
    assert k.orders.get(oid).status.value == "PARTIALLY_FILLED" and k.orders.get(oid).is_open
    k.handle(4, fill(oid, "E1", d("30000"), d("30000")))
    k.handle(5, fill(oid, "E2", d("30000"), d("60000")))
    assert position(k) == QTY and k.orders.get(oid).status.value == "FILLED" and k.state is TradingState.ACTIVE


def test_an_overfill_is_refused_halts_and_leaves_the_order_cancellable():
    k, oid, _, _ = working_order()
    step = k.handle(3, fill(oid, "EX", d("300000"), d("300000")))
    kinds = [type(e).__name__ for e in step.derived]
    assert kinds == ["OrderReportRefused", "TradingStateChanged", "CancelOrder"]  # the kill switch cancels it
    assert k.orders.get(oid).is_open and position(k) == 0
    k.handle(4, OrderCanceled(ts_event=30, ts_init=30, order_id=oid, symbol="EURUSD", reason="canceled on request"))
    assert k.orders.get(oid).status.value == "CANCELED" and not k.orders.open and not k.cancels_pending


@pytest.mark.parametrize(("last", "price", "reason"), [
    ("-100000", "1.1", "fill of -100000 at 1.1: not a trade"),  # a negative quantity flipped a position
    ("0", "1.1", "fill of 0 at 1.1: not a trade"),
    ("50000", "-1", "fill of 50000 at -1: not a trade"),
    ("50000", "5.0", "fill at 5 beyond the order's limit 1.1"),  # a buy limit at 1.1
])
def test_a_fill_that_is_no_trade_of_the_order_is_refused_and_halts(last, price, reason):
    k, oid, _, _ = working_order()
    bad = OrderPartiallyFilled(ts_event=20, ts_init=20, order_id=oid, symbol="EURUSD", side=Side.BUY, trade_id="EB",
                               last_qty=d(last), last_price=d(price), leaves_qty=d("100000"))
    refused, halted, _cancel = k.handle(3, bad).derived
    assert isinstance(refused, OrderReportRefused) and refused.reason == reason
    assert isinstance(halted, TradingStateChanged) and halted.state is TradingState.HALTED
    assert position(k) == 0 and k.orders.get(oid).filled_qty == 0 and not k.orders.get(oid).executions


def test_a_commission_reported_after_its_fill_is_booked_once():
    k, oid, _, _ = working_order()
    k.handle(3, fill(oid, "E1", d("100000"), QTY))  # booked with no commission: its report was still to come
    late = CommissionReported(ts_event=30, ts_init=30, order_id=oid, symbol="EURUSD", trade_id="E1",
                              commission=d("2.2"))
    (pos,) = k.handle(4, late).derived
    assert isinstance(pos, PositionChanged) and pos.commissions == d("2.2") and pos.quantity == QTY
    assert k.portfolio.equity == -d("2.2") + k.portfolio.positions["EURUSD"].unrealized_pnl
    (again,) = k.handle(5, late).derived  # the same report again
    assert isinstance(again, OrderReportRefused) and again.reason == "the commission of execution E1 is booked already"
    (unknown,) = k.handle(6, msgspec.structs.replace(late, trade_id="E9")).derived
    assert unknown.reason == "execution E9 is not booked"
    assert k.portfolio.positions["EURUSD"].commissions == d("2.2") and k.state is TradingState.ACTIVE


def test_an_unusable_execution_report_tightens_trading_as_the_venue_policy_asks():
    k, oid, _, _ = working_order()
    rejected = VenueMessageRejected(ts_event=40, ts_init=40, venue="FIX:EXCH", msg_type="8",
                                    reason="incorrect data format for value (373=6), tag 32", raw="8=FIX.4.4|32=abc|",
                                    tighten=TradingState.REDUCING)
    (changed,) = k.handle(3, rejected).derived
    assert isinstance(changed, TradingStateChanged) and changed.state is TradingState.REDUCING
    assert "32" in changed.cause and k.orders.get(oid).is_open  # reducing: working orders stay
    halted = k.handle(4, msgspec.structs.replace(rejected, tighten=TradingState.HALTED)).derived
    assert [type(e).__name__ for e in halted] == ["TradingStateChanged", "CancelOrder"]
    assert list(k.handle(5, msgspec.structs.replace(rejected, tighten=None)).derived) == []


# --- any interleaving adds up to the venue's CumQty -------------------------------------------------


@st.composite
def venue_reports(draw):
    """An order's executions at the venue (quantities in lots of 1,000), then what reaches the kernel: each
    execution at least once, some repeated, in any order, with order statuses (the venue's CumQty after
    some prefix of its executions, counted by the reporter on any filled quantity up to the kernel's)
    interleaved."""
    lots = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6))
    quantity = sum(lots) + draw(st.integers(0, 20))
    cums = [sum(lots[: i + 1]) for i in range(len(lots))]
    execs = [("exec", f"E{i}", lot, cum) for i, (lot, cum) in enumerate(zip(lots, cums))]
    repeats = draw(st.lists(st.sampled_from(execs), max_size=6))
    statuses = [("status", "", 0, draw(st.sampled_from(cums))) for _ in range(draw(st.integers(0, 3)))]
    reports = draw(st.permutations(execs + repeats + statuses))
    return quantity, sum(lots), reports


@settings(max_examples=300, deadline=None)
@given(venue_reports())
def test_any_interleaving_of_repeated_resent_and_reordered_reports_books_the_venues_cum_qty(case):
    quantity, venue_cum, reports = case
    k, oid, _, _ = working_order(str(quantity * 1000))
    lot = d("1000")
    for seq, (kind, trade_id, lots, cum) in enumerate(reports, 3):
        # a status's reporter counts on the filled quantity the kernel had (possibly less, racing reports)
        last = cum * lot - k.orders.get(oid).filled_qty if kind == "status" else lots * lot
        step = k.handle(seq, fill(oid, trade_id, last, cum * lot, quantity * lot, ts=seq))
        assert not [e for e in step.derived if isinstance(e, OrderReportRefused)], step.derived
    assert position(k) == venue_cum * lot
    assert k.orders.get(oid).filled_qty == venue_cum * lot and k.state is TradingState.ACTIVE
    assert k.orders.get(oid).is_open == (venue_cum < quantity)


def test_a_fill_that_crossed_the_cancel_is_booked_and_the_order_stays_closed():
    """The venue acknowledged the cancel, then reported an execution it made as the cancel crossed it:
    the money moved, so the fill is booked (it was refused, and trading halted); the order stays canceled
    and nothing of it is working again. Its repeat is a duplicate, and a fill past its quantity is refused."""
    k, order_id, _, _ = working_order()
    k.handle(3, fill(order_id, "E1", d("40000"), d("40000")))
    k.handle(4, OrderCanceled(ts_event=21, ts_init=21, order_id=order_id, symbol="EURUSD"))
    assert k.gate.working_orders() == {}
    step = k.handle(5, fill(order_id, "E2", d("30000"), d("70000")))
    assert [type(e) for e in step.derived] == [PositionChanged]
    order = k.orders.get(order_id)
    assert (order.status.value, order.filled_qty, position(k)) == ("CANCELED", d("70000"), d("70000"))
    assert k.gate.working_orders() == {} and k.state is TradingState.ACTIVE
    assert [type(e) for e in k.handle(6, fill(order_id, "E2", d("30000"), d("70000"))).derived] == [DuplicateFillIgnored]
    refused = k.handle(7, fill(order_id, "E3", d("40000"), d("110000"), quantity=d("110000"))).derived
    assert type(refused[0]) is OrderReportRefused and position(k) == d("70000")
    k2, order_id2, _, _ = working_order()
    k2.handle(3, OrderCanceled(ts_event=21, ts_init=21, order_id=order_id2, symbol="EURUSD"))
    k2.handle(4, fill(order_id2, "E1", QTY, QTY))  # all of it crossed the cancel: the order is filled
    assert k2.orders.get(order_id2).status.value == "FILLED" and position(k2) == QTY
