"""The Interactive Brokers venue through ib_async against a server that speaks the TWS wire protocol
(tests/tws_server.py): connect and synchronise, orders to Filled with commission, a reject with its code,
market data as quotes, a connection dropped mid-order and reconciled, a burst within IB's pacing, and
garbage from the server.

Order state is kept by the real order state machine (core/orders.py), as the kernel would keep it."""

from __future__ import annotations

import contextlib
import struct
import time

import anyio
import pytest
from ib_async import IB

from foxhunt.adapters.venues.ib.venue import IbContract, IbVenue
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import (
    CancelOrder,
    CommissionReported,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    ReplaceOrder,
    Side,
)
from foxhunt.messages.system import (
    TradingState,
    VenueConnected,
    VenueDisconnected,
    VenueMessageRejected,
    VenueSessionEvent,
)
from tests.tws_server import Order as TwsOrder
from tests.tws_server import TwsServer, frame
from tests.venue_harness import VenueHarness

CONTRACTS = {
    "EURUSD": IbContract(Instrument(symbol="EURUSD", tick_size=d("0.00005"), lot_size=d("1"), currency="USD"), "CASH"),
    "AAPL": IbContract(Instrument(symbol="AAPL", tick_size=d("0.01"), lot_size=d("1"), currency="USD"), "STK"),
    "ESZ6": IbContract(Instrument(symbol="ESZ6", tick_size=d("0.25"), lot_size=d("1"), currency="USD", multiplier=50),
                       "FUT", "CME", "202612"),
}


class Harness(VenueHarness):
    """An IbVenue with its own ib_async client, talking to `server`."""

    default_qty = "20000"

    def __init__(self, server: TwsServer, **options) -> None:
        super().__init__()
        self.server = server
        self.venue = IbVenue("IB", IB(), "127.0.0.1", server.port, 7, CONTRACTS, lambda: self.book.by_id,
                             backoff_max=0.5, **options)


@contextlib.asynccontextmanager
async def tws():
    server = TwsServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_connect_synchronise_and_qualify_stocks_futures_and_fx():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            pass
    kinds = [(type(e).__name__, getattr(e, "event", "")) for e in h.events]
    assert kinds[:3] == [("VenueSessionEvent", "logon"), ("VenueSessionEvent", "reconciled"), ("VenueConnected", "")]
    assert {s: c.conId for s, c in h.venue.qualified.items()} == {"EURUSD": 12087792, "AAPL": 265598, "ESZ6": 495512563}
    requests = {int(f[0]) for _, f in server.received}
    assert {71, 61, 5, 99, 6, 7, 9} <= requests  # startApi, positions, open and completed orders, account, executions


async def test_what_the_venue_reports_is_stamped_with_the_runs_clock():
    """Not the system clock, which an operator or NTP may step back: the run's clock (runtime/clock.py,
    WallClock) never goes backwards, and the kernel's throttles measure on it."""
    ticks = iter(range(1_000, 1_000_000))
    async with tws() as server:
        h = Harness(server, now=lambda: next(ticks))
        async with h.running():
            order = h.submit()
            await h.until(lambda: h.of(order, OrderFilled))
    stamps = [(e.ts_event, e.ts_init) for e in h.events]
    assert all(ts_event == ts_init < 1_000_000 for ts_event, ts_init in stamps)
    assert [ts for ts, _ in stamps] == sorted(ts for ts, _ in stamps)


async def test_an_order_through_submitted_to_filled_with_commission_and_a_reject_with_its_code():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            filled = h.submit()
            rejected = h.submit(qty="666")
            await h.until(lambda: h.of(filled, OrderFilled) and h.of(rejected, OrderRejected))
    (accepted,) = h.of(filled, OrderAccepted)
    (fill,) = h.of(filled, OrderFilled)
    assert (fill.last_qty, fill.last_price, fill.leaves_qty, fill.side) == (d("20000"), d("1.1"), 0, Side.BUY)
    assert fill.commission == d("0.44")  # 0.2 bp of 22,000
    (reject,) = h.of(rejected, OrderRejected)
    assert reject.reason.startswith("IB 201: ") and "Order rejected - reason:quantity 666 is not allowed" in reject.reason
    assert h.book.get(rejected).status.value == "REJECTED"


async def test_a_modification_a_cancel_and_a_cancel_that_comes_too_late():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.05")
            await h.until(lambda: h.of(resting, OrderAccepted))
            h.venue.send(ReplaceOrder(ts_event=2, ts_init=2, order_id=resting, symbol="EURUSD", quantity=d("30000"),
                                      price=d("1.06")))
            await h.until(lambda: h.of(resting, OrderReplaced))
            h.venue.send(CancelOrder(ts_event=2, ts_init=2, order_id=resting, symbol="EURUSD"))
            await h.until(lambda: h.of(resting, OrderCanceled))
            h.venue.send(CancelOrder(ts_event=3, ts_init=3, order_id=resting, symbol="EURUSD"))
            await h.until(lambda: h.of(resting, OrderCancelRejected))
    (replaced,) = h.of(resting, OrderReplaced)
    assert (replaced.quantity, replaced.price) == (d("30000"), d("1.06"))
    assert [f[0] for _, f in server.received].count("3") == 2  # the order, and its modification
    assert "10148" in h.of(resting, OrderCancelRejected)[0].reason


async def test_market_data_becomes_quotes_and_trades():
    async with tws() as server:
        h = Harness(server, market_data=("EURUSD", "AAPL"))
        async with h.running():
            await h.until(lambda: {q.symbol for q in h.events if isinstance(q, QuoteTick)} == {"EURUSD", "AAPL"})
            await h.until(lambda: {t.symbol for t in h.events if isinstance(t, TradeTick)} == {"EURUSD", "AAPL"})
    trades = {t.symbol: t for t in h.events if isinstance(t, TradeTick)}
    assert (trades["AAPL"].price, trades["AAPL"].size) == (d("190"), d("100"))
    quotes = {q.symbol: q for q in h.events if isinstance(q, QuoteTick)}
    assert (quotes["EURUSD"].bid, quotes["EURUSD"].ask) == (d("1.0999"), d("1.1001"))
    assert (quotes["AAPL"].bid, quotes["AAPL"].ask, quotes["AAPL"].ask_size) == (d("189.99"), d("190.01"), d("3000000"))


async def test_a_dropped_connection_is_reconciled_and_the_order_is_neither_lost_nor_sent_twice():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")  # below the last price: rests
            await h.until(lambda: h.of(resting, OrderAccepted))
            server.drop()
            server.fill_resting()  # filled while foxhunt is away
            await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2)
    after = h.events[next(i for i, e in enumerate(h.events) if isinstance(e, VenueDisconnected)):]
    (fill,) = [e for e in h.events if isinstance(e, OrderFilled)]
    assert fill in after and fill.last_qty == d("20000") and fill.commission == d("0.436")
    reconciled = [e for e in after if isinstance(e, VenueSessionEvent) and e.event == "reconciled"]
    assert after.index(fill) < after.index(reconciled[0]) < after.index(next(e for e in after if isinstance(e, VenueConnected)))
    placed = [f for _, f in server.received if f[0] == "3"]
    assert len(placed) == 1  # one placeOrder, ever
    assert h.book.get(resting).status.value == "FILLED"


async def test_an_error_that_does_not_say_the_order_ended_leaves_it_working_and_its_fill_is_booked():
    """The review's defect: ib_async marks an order Cancelled on any error it does not count as a warning,
    so 10147 or 462 on a live order became OrderCanceled, and the fill that followed was lost."""
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(resting, OrderAccepted))
            server.error_resting(10147, f"OrderId {resting} that needs to be cancelled is not found.")
            server.error_resting(462, "Cannot change to the new Time in Force")
            await h.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "order_error_462"
                                      for e in h.events))
            server.execute_resting(1.0)
            await h.until(lambda: h.of(resting, OrderFilled))
    assert not h.of(resting, OrderCanceled) and h.book.get(resting).status.value == "FILLED"
    (refused,) = h.of(resting, OrderCancelRejected)  # 10147: a cancel refused, the order goes on
    assert refused.reason.startswith("IB 10147: ") and not refused.replace


@pytest.mark.parametrize("how", ["length_beyond_bound", "half_a_message", "silence"])
async def test_a_connection_that_cannot_deliver_is_dropped_reconnected_and_reconciled(how):
    """A frame announcing 2 GiB made ib_async wait for it for ever, deaf to every answer after it; so does
    half a message whose rest never comes, and a gateway that stops answering. Each is found, dropped,
    journaled, and the venue reconnects."""
    async with tws() as server:
        h = Harness(server, probe_after=0.3, probe_timeout=0.3)
        async with h.running():
            if how == "length_beyond_bound":
                server.send_raw(struct.pack(">I", 2**31) + b"garbage")
            elif how == "half_a_message":
                server.send_raw(struct.pack(">I", 1000) + b"half a message")  # the answers queue behind it
            else:
                server.muted = True
            await h.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "connection_dropped"
                                      for e in h.events))
            server.muted = False
            await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2)
            after = h.submit()  # heard again: the order's answers come back
            await h.until(lambda: h.of(after, OrderFilled))
    (dropped,) = [e for e in h.events if isinstance(e, VenueSessionEvent) and e.event == "connection_dropped"]
    expected = "a message of 2147483648 bytes announced" if how == "length_beyond_bound" else "no answer to a probe"
    assert dropped.detail.startswith(expected), dropped.detail
    assert any(isinstance(e, VenueDisconnected) for e in h.events)


async def test_an_execution_of_a_negative_quantity_is_refused_not_booked():
    """The review's defect: shares -100,000 became a fill, flipped the position and showed a profit that
    never was. It is published as IB said it, and the kernel's rules refuse it (and halt)."""
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(resting, OrderAccepted))
            server.execute_resting(1.0, shares=-100_000)
            await h.until(lambda: h.refused)
    (refused,) = h.refused
    assert refused.last_qty == d("-100000") and h.book.get(resting).filled_qty == 0


@pytest.mark.parametrize("how", ["link_restored", "restart"])
async def test_a_commission_reported_after_a_reconciled_fill_is_published_on_its_own(how):
    """Reconciliation books an execution whose commission report comes after it, which was then ignored
    (commissions understated). `link_restored`: IB's link to its servers comes back (1102) between the two.
    `restart`: the order filled while foxhunt was down, and the restarted process holds no ib_async Trade
    for it, so ib_async emits no event for the report (wrapper.commissionReport: "not a live execution").
    Now it is published, and the kernel books it (tests/unit/test_fills_once.py)."""
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(resting, OrderAccepted))
            server.commission_delay = 0.3
            if how == "link_restored":
                server.execute_resting(1.0)
                server.send_raw(frame(4, 2, -1, 1102, "Connectivity between IB and TWS has been restored - data "
                                                      "maintained.", ""))
                await h.until(lambda: h.of(resting, CommissionReported))
        if how == "restart":
            server.fill_resting()
            book, h = h.book, Harness(server)
            h.book = book  # the kernel's orders, recovered from the journal
            async with h.running():
                await h.until(lambda: h.of(resting, CommissionReported))
    (fill,) = h.of(resting, OrderFilled)
    (commission,) = h.of(resting, CommissionReported)
    assert fill.commission == 0 and commission.trade_id == fill.trade_id and commission.commission == d("0.436")
    assert h.events.index(fill) < h.events.index(commission) and not h.venue.commission_untold


async def test_an_execution_of_an_order_foxhunt_did_not_send_is_recorded_and_not_booked():
    async with tws() as server:
        server.orders[99] = TwsOrder(99, 3, "EURUSD", "BUY", 5000.0, "LMT", 1.09, order_ref="typed-in-tws")
        server.fill_resting()  # another client's order, filled before foxhunt connects
        h = Harness(server)
        async with h.running():
            pass
    (refused,) = [e for e in h.events if isinstance(e, VenueMessageRejected)]
    assert "of an order foxhunt did not send (orderRef 'typed-in-tws', IB order 99): not booked" in refused.reason
    assert "shares=5000.0" in refused.raw and refused.tighten == TradingState.HALTED and not h.book.by_id


@pytest.mark.parametrize("policy", [TradingState.HALTED, TradingState.REDUCING, None])
async def test_ghost_executions_reported_live_are_journaled_refused_and_tighten_as_configured(policy):
    """The review's ghosts G1 to G3: live executions of orders foxhunt never placed, one with no orderRef, one
    with another's, one with the orderRef of an order foxhunt forgot. ib_async emits no event for them (it holds
    no Trade): each was a line on stderr and no journal row. Each is now an input the kernel refuses to book,
    with the reason, and trading goes where `on_foreign_execution` says."""
    async with tws() as server:
        h = Harness(server, on_foreign_execution=policy)
        async with h.running():
            mine = h.submit()
            await h.until(lambda: h.of(mine, OrderFilled))
            ghosts = [server.ghost_execution(501, 10_000.0), server.ghost_execution(502, 25_000.0, "another-app"),
                      server.ghost_execution(503, 5_000.0, "forgotten-order-id")]
            await h.until(lambda: len([e for e in h.events if isinstance(e, VenueMessageRejected)]) == 3)
            after = h.submit()  # the venue goes on: its own orders still fill and book
            await h.until(lambda: h.of(after, OrderFilled))
    refused = [e for e in h.events if isinstance(e, VenueMessageRejected)]
    assert [r.reason.split()[1] for r in refused] == ghosts and all(r.msg_type == "execDetails" for r in refused)
    assert all(r.tighten == policy and "not booked" in r.reason for r in refused)
    assert "another-app" in refused[1].reason and "shares=25000.0" in refused[1].raw
    assert set(h.book.by_id) == {mine, after}  # nothing of the ghosts was booked


async def test_a_flood_of_order_statuses_keeps_each_one_cheap():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(resting, OrderAccepted))
            server.flood_status(5000)
            after = h.submit()  # behind the flood
            await h.until(lambda: h.of(after, OrderFilled), timeout=60)
            assert len(h.venue.trades[resting].log) <= 4  # bounded, so formatting one costs the same
    assert h.book.get(resting).is_open and len(h.of(resting, OrderAccepted)) == 1


async def test_a_burst_of_orders_respects_ibs_pacing():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            sent: list[float] = []  # when each placeOrder left for the socket, measured where it leaves
            conn = h.venue.ib.client.conn
            write = conn.sendMsg

            def timed(data: bytes) -> None:
                if data[4:6] == b"3\0":
                    sent.append(time.monotonic())
                write(data)

            conn.sendMsg = timed
            ids = [h.submit() for _ in range(100)]
            await h.until(lambda: all(h.book.get(i).status.value == "FILLED" for i in ids), timeout=30)
    busiest = max(sum(1 for u in sent if t <= u < t + 1.0) for t in sent)
    assert len(sent) == 100 and busiest <= 50  # IB's limit: 50 messages a second
    assert sent[-1] - sent[0] > 1.0  # so the burst was held back, not sent at once
    assert len([f for _, f in server.received if f[0] == "3"]) == 100


async def test_order_statuses_and_executions_ib_async_cannot_read_are_journaled_with_their_fields():
    """The review's case: statuses and executions with `abc` for a quantity, or a field missing, were logged by
    ib_async's decoder and dropped (no journal row). Each is now refused with its raw fields, and, since it may
    have carried money, trading tightens as `on_rejected_execution` says; the venue goes on."""
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(resting, OrderAccepted))
            (o,) = server.orders.values()
            server.send_raw(frame(3, o.order_id, "Submitted", "abc", o.qty, 0, o.perm_id, 0, 0, o.client_id, "", 0))
            server.send_raw(frame(3, o.order_id, "Submitted", 0, o.qty, 0, o.perm_id, 0, 0, o.client_id, ""))  # short
            server.execute_resting(1.0, shares="abc")
            await h.until(lambda: len([e for e in h.events if isinstance(e, VenueMessageRejected)]) == 3)
            after = h.submit()
            await h.until(lambda: h.of(after, OrderFilled))
    refused = [e for e in h.events if isinstance(e, VenueMessageRejected)]
    assert [r.msg_type for r in refused] == ["orderStatus", "orderStatus", "execDetails"]
    assert all(r.tighten == TradingState.HALTED and r.reason.startswith("ib_async cannot read it") for r in refused)
    assert "|abc|" in refused[0].raw and "10 fields, 11 expected" in refused[1].reason
    assert "|abc|" in refused[2].raw and h.book.get(resting).filled_qty == 0


async def test_garbage_from_the_server_is_survived():
    async with tws() as server:
        h = Harness(server)
        async with h.running():
            server.send_raw(frame("not-a-number", "x"))
            server.send_raw(frame(3, "seven", "Filled"))  # an order status with nonsense in it
            server.send_raw(frame(999, 1, 2, 3))  # a message id nobody knows
            await anyio.sleep(0.2)
            after = h.submit()
            await h.until(lambda: h.of(after, OrderFilled))
    assert h.book.get(after).status.value == "FILLED"
    refused = {e.msg_type: e for e in h.events if isinstance(e, VenueMessageRejected)}  # each on the record
    assert set(refused) == {"message without an id", "orderStatus", "message 999"}
    assert refused["orderStatus"].tighten == TradingState.HALTED and refused["message 999"].tighten is None


@pytest.mark.postgres
def test_the_daemon_trades_on_ibs_market_data_and_its_journal_verifies(cli_env, pg_dsn, journal_name, state_dir,
                                                                        tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    server = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "tws_server.py"), "200"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        env = {**cli_env, "FOXHUNT_RUN__VENUE": "ib", "FOXHUNT_IB__PORT": str(port),
               "FOXHUNT_IB__MARKET_DATA": '["EURUSD"]', "FOXHUNT_ADMIN__ENABLED": "false",
               "FOXHUNT_STRATEGY__EMA_CROSS__FAST": "2", "FOXHUNT_STRATEGY__EMA_CROSS__SLOW": "5"}
        run = subprocess.run([sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--feed", "none",
                              "--duration", "4", "--json"], env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.stdin.close()
        server.wait(10)
        server.stdout.close()
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["fills"] > 0 and summary["inputs"] > 100, summary
    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                            env=cli_env, capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr[-3000:]
    assert json.loads(verify.stdout)["state_digest"] == summary["state_digest"]
