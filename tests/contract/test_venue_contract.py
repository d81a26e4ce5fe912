"""One suite over every venue (the simulated one, FIX against a real quickfix acceptor, Interactive Brokers
against a server that speaks the TWS protocol): the Venue port's contract (foxhunt/ports.py).

The lifecycle, on all three: an order submitted and acknowledged, filled, partly filled and working on,
canceled, replaced (the venue's new terms), rejected with the venue's reason. A connection lost and
regained (FIX and IB: the simulated venue lives in foxhunt's process and has no connection to lose):
trading is told the venue is down, and on its return the order filled meanwhile is reconciled, once.

What a counterparty that misbehaves as real ones do must never do to foxhunt's positions (FIX and IB):

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

from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.config import SimVenueConfig
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    ReplaceOrder,
)
from foxhunt.messages.system import (
    TradingState,
    VenueConnected,
    VenueDisconnected,
    VenueMessageRejected,
    VenueSessionEvent,
)
from foxhunt.runtime.clock import EventClock
from tests.fakes import INSTRUMENTS, quote
from tests.integration import test_fix_venue as fix_tests
from tests.integration import test_ib_venue as ib_tests
from tests.tws_server import TwsServer
from tests.venue_harness import VenueHarness

FILLS = (OrderFilled, OrderPartiallyFilled)


class SimHarness(VenueHarness):
    """The simulated venue, answering at once: its reports are what `send` and `on_market` return."""

    def __init__(self) -> None:
        super().__init__()
        self.venue = SimVenue(INSTRUMENTS, SimVenueConfig(), EventClock())
        self.ts = 0

    @contextlib.asynccontextmanager
    async def running(self, connect: bool = True):
        for msg in self.venue.connect():
            self.record(msg)
        self.quote("1.09990", "1.10010")
        yield

    def quote(self, bid: str, ask: str, bid_size: str = "0", ask_size: str = "0") -> None:
        self.ts += 1_000_000
        for msg in self.venue.on_market(quote(self.ts, bid, ask, bid_size, ask_size)):
            self.record(msg)


class SimCounterparty:
    """The simulated venue (adapters/venues/sim.py): what an order meets is the quote it is given."""

    name = "sim"

    def harness(self, **options) -> VenueHarness:
        return SimHarness()

    async def rest(self, h) -> str:
        oid = h.submit(qty="100000", order_type=OrderType.LIMIT, price="1.09")  # below the bid: rests
        await h.until(lambda: h.of(oid, OrderAccepted))
        return oid

    async def fill(self, h) -> str:
        return await _answered(h, h.submit(qty="100000"), OrderFilled)  # a market order takes the ask

    async def partial(self, h) -> str:
        oid = await self.rest(h)
        h.quote("1.08990", "1.09000", ask_size="50000")  # the ask reaches its limit, with half its size
        return await _answered(h, oid, OrderPartiallyFilled)

    async def reject(self, h) -> str:
        return await _answered(h, h.submit(symbol="XAUUSD", qty="100000"), OrderRejected)


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

    async def rest(self, h) -> str:
        oid = h.submit(qty="100000", order_type=OrderType.LIMIT, price="1.09")
        await h.until(lambda: h.of(oid, OrderAccepted))
        return oid

    async def fill(self, h) -> str:
        return await _answered(h, h.submit(qty="100000"), OrderFilled)  # a market order fills at once

    async def partial(self, h) -> str:  # above 150,000 units half of a limit order fills at once
        return await _answered(h, h.submit(qty="200000", order_type=OrderType.LIMIT, price="1.09"),
                               OrderPartiallyFilled)

    async def reject(self, h) -> str:
        return await _answered(h, h.submit(symbol="XAUUSD", qty="100000"), OrderRejected)

    async def filled_while_away(self, h) -> str:
        """A resting order; the exchange drops the connection, fills it, and takes the next logon."""
        oid = h.submit(qty="100000", order_type=OrderType.LIMIT, price="1.09", account="DROP")
        await h.until(lambda: h.of(oid, OrderAccepted))
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

    async def rest(self, h) -> str:
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09")  # below the last price: rests
        await h.until(lambda: h.of(oid, OrderAccepted))
        return oid

    async def fill(self, h) -> str:
        return await _answered(h, h.submit(), OrderFilled)  # a market order fills at the last price

    async def partial(self, h) -> str:
        oid = await self.rest(h)
        self.server.execute_resting(0.5)
        return await _answered(h, oid, OrderPartiallyFilled)

    async def reject(self, h) -> str:
        return await _answered(h, h.submit(qty="666"), OrderRejected)  # the server's rule for 666 units

    async def filled_while_away(self, h) -> str:
        """A resting order; the connection drops and the order fills while foxhunt is away."""
        oid = await self.rest(h)
        self.server.drop()
        self.server.fill_resting()
        return oid

    def restarted(self, h) -> VenueHarness:
        """A new process on the same book: ib_async's start-up synchronisation asks for today's executions."""
        h2 = self.harness()
        h2.book, h2.seq = h.book, h.seq
        return h2


async def _answered(h, oid: str, kind: type) -> str:
    await h.until(lambda: h.of(oid, kind))
    return oid


async def _heard(h, oid: str, what: str) -> None:
    match what:
        case "rest":
            await h.until(lambda: h.of(oid, OrderAccepted))
        case "half" | "overfill":
            await h.until(lambda: any(h.of(oid, kind) for kind in FILLS))
        case "unusable":
            await h.until(lambda: any(isinstance(e, VenueMessageRejected) for e in h.events))


@contextlib.asynccontextmanager
async def _counterparty(kind: str, tmp_path: Path) -> AsyncIterator[SimCounterparty | FixCounterparty | IbCounterparty]:
    if kind == "sim":
        yield SimCounterparty()
    elif kind == "fix":
        with fix_tests.Exchange(tmp_path) as exchange:
            yield FixCounterparty(exchange, tmp_path)
    else:
        async with ib_tests.tws() as server:
            yield IbCounterparty(server)


@pytest.fixture(params=["sim", "fix", "ib"])
async def venue(request, tmp_path):
    """Every venue: the lifecycle of an order."""
    async with _counterparty(request.param, tmp_path) as c:
        yield c


@pytest.fixture(params=["fix", "ib"])
async def counterparty(request, tmp_path):
    """The venues across a connection: what a remote counterparty can do to foxhunt."""
    async with _counterparty(request.param, tmp_path) as c:
        yield c


async def test_an_order_is_acknowledged_and_filled_in_full(venue):
    h = venue.harness()
    async with h.running():
        oid = await venue.fill(h)
    (accepted,) = h.of(oid, OrderAccepted)
    (fill,) = h.of(oid, OrderFilled)
    order = h.book.get(oid)
    assert order.status.value == "FILLED" and order.filled_qty == order.quantity == fill.cum_qty
    assert fill.leaves_qty == 0 and fill.last_price > 0 and fill.trade_id and accepted.venue_order_id
    assert h.events.index(accepted) < h.events.index(fill) and not h.refused and not h.duplicates


async def test_a_partial_fill_leaves_the_order_working_and_its_cancel_keeps_what_filled(venue):
    h = venue.harness()
    async with h.running():
        oid = await venue.partial(h)
        order = h.book.get(oid)
        assert order.status.value == "PARTIALLY_FILLED" and 0 < order.filled_qty < order.quantity
        (part,) = h.of(oid, OrderPartiallyFilled)
        assert part.leaves_qty == order.quantity - part.cum_qty and part.cum_qty == order.filled_qty
        h.send(CancelOrder(ts_event=2, ts_init=2, order_id=oid, symbol="EURUSD", reason="contract"))
        await h.until(lambda: h.of(oid, OrderCanceled))
    assert order.status.value == "CANCELED" and order.filled_qty == part.cum_qty and not h.refused


async def test_a_resting_order_is_replaced_on_the_terms_asked_then_canceled(venue):
    h = venue.harness()
    async with h.running():
        oid = await venue.rest(h)
        quantity = 2 * h.book.get(oid).quantity
        h.send(ReplaceOrder(ts_event=2, ts_init=2, order_id=oid, symbol="EURUSD", quantity=quantity,
                            price=d("1.08")))
        await h.until(lambda: h.of(oid, OrderReplaced))
        h.send(CancelOrder(ts_event=3, ts_init=3, order_id=oid, symbol="EURUSD", reason="contract"))
        await h.until(lambda: h.of(oid, OrderCanceled))
    (replaced,) = h.of(oid, OrderReplaced)
    assert (replaced.quantity, replaced.price) == (quantity, d("1.08"))
    order = h.book.get(oid)
    assert (order.quantity, order.price, order.status.value, order.filled_qty) == (quantity, d("1.08"), "CANCELED", 0)
    assert not h.refused


async def test_a_rejected_order_carries_the_venues_reason(venue):
    h = venue.harness()
    async with h.running():
        oid = await venue.reject(h)
    (rejected,) = h.of(oid, OrderRejected)
    assert rejected.reason and h.book.get(oid).status.value == "REJECTED"
    assert not h.of(oid, OrderFilled) and not h.refused


async def test_an_order_filled_while_the_connection_was_down_is_reconciled_once(counterparty):
    """The venue tells trading it is down (VenueDisconnected: the kernel holds new orders and marks the
    working ones uncertain), and on its return reports what it missed before it says it is back."""
    h = counterparty.harness()
    async with h.running():
        oid = await counterparty.filled_while_away(h)
        await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2)
    down = next(i for i, e in enumerate(h.events) if isinstance(e, VenueDisconnected))
    back = max(i for i, e in enumerate(h.events) if isinstance(e, VenueConnected))
    fills = h.of(oid, OrderFilled)
    assert fills and all(down < h.events.index(f) < back for f in fills)  # reconciled before trading resumes
    order = h.book.get(oid)
    assert order.status.value == "FILLED" and order.filled_qty == order.quantity
    assert not h.refused and len(fills) - len([f for f in fills if f in h.duplicates]) == 1  # booked once


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
