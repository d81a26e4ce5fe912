"""One suite over every venue that can express it (FIX against a real quickfix acceptor, Interactive Brokers
against a server that speaks the TWS protocol): what a counterparty that misbehaves as real ones do must
never do to foxhunt's positions (the Venue port's contract, foxhunt/ports.py).

- An execution reported again after a restart (FIX: resent with PossDupFlag=Y, answering a ResendRequest
  that spans the restart; IB: reqExecutions at the new connection) is published and booked once.
- An overfill is refused, and the order stays cancellable: the venue's confirmation of its cancel applies.
- An execution the venue reports that cannot be used is journaled with its raw text, nothing is booked, and
  trading tightens as the venue's policy says.

The order book is kept as the kernel keeps it (tests/venue_harness.py: duplicates and refusals by the
kernel's own rules in core/orders.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderFilled,
    OrderPartiallyFilled,
    OrderType,
)
from foxhunt.messages.system import TradingState, VenueMessageRejected, VenueSessionEvent
from tests import test_fix_venue as fix_tests
from tests import test_ib_venue as ib_tests
from tests.tws_server import TwsServer
from tests.venue_harness import VenueHarness

FILLS = (OrderFilled, OrderPartiallyFilled)


class FixCounterparty:
    """The quickfix exchange: what an order meets is chosen by its Account(1) (tests/fix_exchange.py)."""

    name = "fix"
    execution = "8"  # how a rejected execution's message type reads
    # the session event that journals how a restarted venue hears of what it had heard before
    recovery = ("resend_request_sent", "BeginSeqNo=2 EndSeqNo=0")

    def __init__(self, exchange: fix_tests.Exchange, tmp_path: Path) -> None:
        self.exchange, self.tmp_path = exchange, tmp_path

    def harness(self, **options) -> VenueHarness:
        return fix_tests.Harness(self.tmp_path, self.exchange.port, **options)

    async def submit(self, h, what: str) -> str:
        """An order that rests ("rest"), has half of it executed ("half"), is reported filled three times
        over ("overfill") or has its execution reported unreadably ("unusable"); back once that is heard."""
        qty, account = {"rest": ("100000", ""), "half": ("200000", ""), "overfill": ("100000", "OVERFILL"),
                        "unusable": ("100000", "BAD_FILL")}[what]
        oid = h.submit(qty=qty, order_type=OrderType.LIMIT, price="1.09", account=account)
        await _heard(h, oid, what)
        return oid

    def restarted(self, h) -> VenueHarness:
        """A new process on the same book and message store, which asks the counterparty to resend all it
        sent since its first Logon: the execution comes again, with PossDupFlag=Y."""
        fix_tests.set_seqnums(self.tmp_path / "store", target=2)
        h2 = self.harness()
        h2.book, h2.seq = h.book, h.seq
        return h2


class IbCounterparty:
    """The TWS-protocol server: what an order meets is done to it by the test, through the server."""

    name = "ib"
    execution = "execDetails"
    recovery = ("reconciled", "1 execution(s), working")

    def __init__(self, server: TwsServer) -> None:
        self.server = server

    def harness(self, **options) -> VenueHarness:
        return ib_tests.Harness(self.server, **options)

    async def submit(self, h, what: str) -> str:
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09")  # below the last price: rests
        await h.until(lambda: h.of(oid, OrderAccepted))
        match what:
            case "half":
                self.server.execute_resting(0.5)
            case "overfill":
                self.server.misreport_resting(3 * float(h.default_qty))
            case "unusable":
                self.server.execute_resting(1.0, shares=float("nan"))
        await _heard(h, oid, what)
        return oid

    def restarted(self, h) -> VenueHarness:
        """A new process on the same book: ib_async's start-up synchronisation asks for today's executions."""
        h2 = self.harness()
        h2.book, h2.seq = h.book, h.seq
        return h2


async def _heard(h, oid: str, what: str) -> None:
    match what:
        case "rest":
            await h.until(lambda: h.of(oid, OrderAccepted))
        case "half" | "overfill":
            await h.until(lambda: any(h.of(oid, kind) for kind in FILLS))
        case "unusable":
            await h.until(lambda: any(isinstance(e, VenueMessageRejected) for e in h.events))


@contextlib.asynccontextmanager
async def _counterparty(kind: str, tmp_path: Path) -> AsyncIterator[FixCounterparty | IbCounterparty]:
    if kind == "fix":
        with fix_tests.Exchange(tmp_path) as exchange:
            yield FixCounterparty(exchange, tmp_path)
    else:
        async with ib_tests.tws() as server:
            yield IbCounterparty(server)


@pytest.fixture(params=["fix", "ib"])
async def counterparty(request, tmp_path):
    async with _counterparty(request.param, tmp_path) as c:
        yield c


async def test_an_execution_reported_again_after_a_restart_is_booked_once(counterparty):
    h = counterparty.harness()
    async with h.running():
        oid = await counterparty.submit(h, "half")
    (first,) = [f for kind in FILLS for f in h.of(oid, kind)]
    assert first.trade_id and first.cum_qty == first.last_qty  # the venue's id and CumQty come with it
    h2 = counterparty.restarted(h)
    async with h2.running():
        await h2.until(lambda: any(f.trade_id == first.trade_id for f in h2.of(oid, type(first))))
    again = [f for f in h2.of(oid, type(first)) if f.trade_id == first.trade_id]
    assert again and all(f in h2.duplicates for f in again)  # published, and booked once only
    event, detail = counterparty.recovery
    assert any(isinstance(e, VenueSessionEvent) and e.event == event and detail in e.detail for e in h2.events)
    assert h2.book.get(oid).filled_qty == first.last_qty and h2.book.get(oid).is_open


async def test_an_overfill_is_refused_and_the_order_stays_cancellable(counterparty):
    h = counterparty.harness()
    async with h.running():
        oid = await counterparty.submit(h, "overfill")
        (overfill,) = h.refused  # beyond the order's quantity: the kernel refuses it (and halts, cancelling)
        assert overfill.last_qty == 3 * h.book.get(oid).quantity and h.book.get(oid).is_open
        h.venue.send(CancelOrder(ts_event=2, ts_init=2, order_id=oid, symbol="EURUSD", reason="kill switch"))
        await h.until(lambda: h.of(oid, OrderCanceled))
    assert h.book.get(oid).status.value == "CANCELED" and h.book.get(oid).filled_qty == 0


@pytest.mark.parametrize("policy", [TradingState.HALTED, TradingState.REDUCING])
async def test_an_unusable_execution_is_journaled_with_its_raw_text_and_tightens_trading(counterparty, policy):
    h = counterparty.harness(on_rejected_execution=policy)
    async with h.running():
        oid = await counterparty.submit(h, "unusable")
    (rejected,) = [e for e in h.events if isinstance(e, VenueMessageRejected)]
    assert (rejected.msg_type, rejected.tighten) == (counterparty.execution, policy)
    assert oid in rejected.raw and rejected.reason  # the message as it came, and why it could not be used
    assert not any(h.of(oid, kind) for kind in FILLS) and h.book.get(oid).filled_qty == 0
