"""The FIX venue against a real quickfix acceptor acting as the exchange (tests/fix_exchange.py, a
subprocess): logon, orders through their lifecycle, rejects, a dropped connection and reconciliation, a
restart on persisted sequence numbers, a failure in our own handling, and a long run under GC pressure.

Order state is kept by the real order state machine (core/orders.py), as the kernel would keep it."""

from __future__ import annotations

import datetime
import gc
import itertools
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import anyio
import psycopg
import pytest

from foxhunt.adapters.venues.fix import parsing
from foxhunt.adapters.venues.fix.session import GIL_SWITCH_S, FixEngine, bundled_fix44, settings_text
from foxhunt.adapters.venues.fix.venue import FixVenue
from foxhunt.messages import codec
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrdersUncertain,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
)
from foxhunt.messages.system import (
    TradingState,
    VenueConnected,
    VenueDisconnected,
    VenueMessageIgnored,
    VenueMessageRejected,
    VenueSessionEvent,
)
from tests.venue_harness import VenueHarness

HERE = Path(__file__).resolve().parents[1]  # tests/, where the exchange lies


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Exchange:
    """The exchange subprocess, restartable; its store (sequence numbers) and message log persist."""

    def __init__(self, base: Path, rest_limits: bool = False, mass_status: bool = True,
                 credentials: str = "") -> None:
        self.rest_limits = rest_limits
        self.mass_status = mass_status
        self.credentials = credentials  # USER:PASSWORD a Logon must carry
        self.port = free_port()
        self.base = base
        self.log = base / "exch-log"
        self.settings = base / "exchange.cfg"
        self.settings.write_text("\n".join([
            "[DEFAULT]", "ConnectionType=acceptor", f"SocketAcceptPort={self.port}",
            f"FileStorePath={base / 'exch-store'}", f"FileLogPath={self.log}", "NonStopSession=Y", "SocketNodelay=Y",
            "UseDataDictionary=Y", f"DataDictionary={bundled_fix44()}", "ValidateUserDefinedFields=N", "",
            "[SESSION]", "BeginString=FIX.4.4",
            "SenderCompID=EXCH", "TargetCompID=FOXHUNT", "",
        ]))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        args = [*(["--rest-limits"] if self.rest_limits else []), *([] if self.mass_status else ["--no-mass-status"]),
                *(["--credentials", self.credentials] if self.credentials else [])]
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fix_exchange.py"), str(self.settings), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "exchange: listening", self.proc.stderr.read()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc.stderr.close()
            self.proc = None


@pytest.fixture
def exchange(tmp_path):
    with Exchange(tmp_path) as ex:
        yield ex.port, ex.log


class Harness(VenueHarness):
    """A FixVenue on its own message store, talking to the exchange on `port`."""

    def __init__(self, tmp_path: Path, port: int, max_per_second: float = 0, logon=(), **venue_options) -> None:
        super().__init__()
        settings = tmp_path / "foxhunt-fix.cfg"
        settings.write_text(settings_text(
            sender="FOXHUNT", target="EXCH", host="127.0.0.1", port=port, heartbeat_s=5, reconnect_s=1,
            reset_on_logon=False, store_dir=tmp_path / "store", log_dir=tmp_path / "log",
            data_dictionary=bundled_fix44(),
        ))
        self.engine = FixEngine(settings, "FOXHUNT", "EXCH", max_per_second=max_per_second, logon=logon)
        self.venue = FixVenue("FIX", self.engine, lambda: self.book.by_id, **venue_options)

    def submit(self, symbol: str = "EURUSD", qty: str | None = None, order_type=OrderType.MARKET, price=None,
               account: str = "") -> str:
        self.venue.account = account
        return super().submit(symbol, qty, order_type, price)


def from_us(log_dir: Path, msg_type: str, *fields: str) -> int:
    """Messages of this MsgType (and these `tag=value` fields) that reached the exchange from foxhunt,
    from its quickfix message log."""
    text = "".join(p.read_text() for p in log_dir.glob("*.messages.current.log"))
    needles = [f"\x0135={msg_type}\x01", "\x0149=FOXHUNT\x01", *(f"\x01{f}\x01" for f in fields)]
    return sum(1 for line in text.splitlines() if all(n in line for n in needles))


def sent_orders(log_dir: Path, cl_ord_id: str) -> int:
    """NewOrderSingles with this ClOrdID that reached the exchange."""
    return from_us(log_dir, "D", f"11={cl_ord_id}")


async def test_logon_and_a_market_order_filled_with_commission(exchange, tmp_path):
    port, _ = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        assert isinstance(h.events[0], VenueSessionEvent) and h.events[0].event == "logon"
        oid = h.submit()
        await h.until(lambda: h.of(oid, OrderFilled))
    (accepted,) = h.of(oid, OrderAccepted)
    assert accepted.venue_order_id.startswith("X")
    (fill,) = h.of(oid, OrderFilled)
    assert (fill.last_qty, fill.last_price, fill.leaves_qty) == (d("100000"), d("1.1"), 0)
    assert fill.commission == d("2.2")  # 0.2 bp of 110,000
    assert h.book.get(oid).status.value == "FILLED"


async def test_the_message_rate_limit_spaces_orders_out_in_order_without_holding_the_loop(exchange, tmp_path):
    port, log_dir = exchange
    h = Harness(tmp_path, port, max_per_second=20)  # one message every 50 ms
    async with h.running():
        started = time.monotonic()
        oids = [h.submit() for _ in range(6)]
        queued_in = time.monotonic() - started
        await h.until(lambda: all(h.of(oid, OrderFilled) for oid in oids))
    assert queued_in < 0.05  # the loop did not wait out the limit
    arrivals = []  # (arrival time at the exchange, ClOrdID), from its message log
    for line in "".join(p.read_text() for p in log_dir.glob("*.messages.current.log")).splitlines():
        if "\x0135=D\x01" in line:
            stamp = datetime.datetime.strptime(line.split(" : ")[0][:24], "%Y%m%d-%H:%M:%S.%f")
            arrivals.append((stamp, line.split("\x0111=")[1].split("\x01")[0]))
    assert [oid for _, oid in arrivals] == oids
    gaps = [(b - a).total_seconds() for (a, _), (b, _) in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.045, gaps  # 50 ms apart, less the clock's and the wire's jitter


async def test_replace_partial_fill_cancel_and_a_reject_with_its_reason(exchange, tmp_path):
    port, exchange_log = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        resting = h.submit(order_type=OrderType.LIMIT, price="1.09")
        big = h.submit(qty="200000", order_type=OrderType.LIMIT, price="1.095")
        bad = h.submit(symbol="XAUUSD")
        await h.until(lambda: h.of(resting, OrderAccepted) and h.of(big, OrderPartiallyFilled) and h.of(bad, OrderRejected))
        h.venue.send(ReplaceOrder(ts_event=2, ts_init=2, order_id=resting, symbol="EURUSD", quantity=d("50000"),
                                  price=d("1.0905")))
        await h.until(lambda: h.of(resting, OrderReplaced))
        h.venue.send(CancelOrder(ts_event=3, ts_init=3, order_id=resting, symbol="EURUSD"))  # by its new ClOrdID
        await h.until(lambda: h.of(resting, OrderCanceled))
        h.venue.send(CancelOrder(ts_event=4, ts_init=4, order_id=resting, symbol="EURUSD"))  # once more: too late
        await h.until(lambda: h.of(resting, OrderCancelRejected))
        h.venue.send(ReplaceOrder(ts_event=5, ts_init=5, order_id=resting, symbol="EURUSD", quantity=d("40000")))
        await h.until(lambda: len(h.of(resting, OrderCancelRejected)) == 2)
    (replaced,) = h.of(resting, OrderReplaced)
    assert (replaced.quantity, replaced.price) == (d("50000"), d("1.0905"))
    (partial,) = h.of(big, OrderPartiallyFilled)
    assert (partial.last_qty, partial.leaves_qty, partial.last_price) == (d("100000"), d("100000"), d("1.095"))
    (rejected,) = h.of(bad, OrderRejected)
    assert rejected.reason == "unknown symbol (103=1): no such symbol"
    too_late, not_replaced = h.of(resting, OrderCancelRejected)
    assert "too late to cancel" in too_late.reason and not too_late.replace
    assert "unknown order" in not_replaced.reason and not_replaced.replace  # CxlRejResponseTo(434)=2
    venue_id = h.of(resting, OrderAccepted)[0].venue_order_id  # OrderID(37) names the order too
    assert from_us(exchange_log, "G", f"37={venue_id}") == 2 and from_us(exchange_log, "F", f"37={venue_id}") == 2


async def test_a_replace_whose_answer_was_lost_with_the_connection_is_reconciled(exchange, tmp_path):
    port, exchange_log = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="DROP_ON_REPLACE")
        await h.until(lambda: h.of(oid, OrderAccepted))
        h.venue.send(ReplaceOrder(ts_event=2, ts_init=2, order_id=oid, symbol="EURUSD", quantity=d("50000"),
                                  price=d("1.0905")))
        await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
        assert not h.of(oid, OrderCancelRejected)  # the replace was never answered
        h.venue.send(CancelOrder(ts_event=3, ts_init=3, order_id=oid, symbol="EURUSD"))
        await h.until(lambda: h.of(oid, OrderCanceled) or h.of(oid, OrderCancelRejected))
    (replaced,) = h.of(oid, OrderReplaced)  # recorded from the order's status, before trading resumed
    reconnected = [e for e in h.events if isinstance(e, VenueConnected)][1]
    assert h.events.index(replaced) < h.events.index(reconnected)
    assert (replaced.quantity, replaced.price) == (d("50000"), d("1.0905"))
    assert h.of(oid, OrderCanceled) and not h.of(oid, OrderCancelRejected)  # named by the replace's ClOrdID
    assert from_us(exchange_log, "F", "38=50000") == 1  # and with the order's quantity at the venue


async def test_after_a_restart_a_replaced_order_is_canceled_by_the_clordid_the_venue_knows(exchange, tmp_path):
    port, exchange_log = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09")
        await h.until(lambda: h.of(oid, OrderAccepted))
        h.venue.send(ReplaceOrder(ts_event=2, ts_init=2, order_id=oid, symbol="EURUSD", quantity=d("50000")))
        await h.until(lambda: h.of(oid, OrderReplaced))
    h2 = Harness(tmp_path, port)  # a restart: the order comes back from the journal, its ClOrdIDs do not
    h2.book, h2.seq = h.book, h.seq
    async with h2.running():
        await h2.until(lambda: any(isinstance(e, VenueConnected) for e in h2.events))  # reconciled
        h2.venue.send(CancelOrder(ts_event=3, ts_init=3, order_id=oid, symbol="EURUSD"))
        await h2.until(lambda: h2.of(oid, OrderCanceled) or h2.of(oid, OrderCancelRejected))
    assert not h2.of(oid, OrderCancelRejected) and h2.book.get(oid).status.value == "CANCELED"
    assert from_us(exchange_log, "F") == 1  # named by the replace's ClOrdID the first time: no refused try


async def test_session_and_business_rejects_of_an_order_reject_it_with_the_counterpartys_reason(exchange, tmp_path):
    """Both name our message only by its MsgSeqNum: the venue finds the order through what it sent."""
    port, _ = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        fine = h.submit()
        refused_by_session = h.submit(account="SESSION_REJECT")
        refused_by_business = h.submit(account="BUSINESS_REJECT")
        await h.until(lambda: h.of(fine, OrderFilled) and h.of(refused_by_session, OrderRejected)
                      and h.of(refused_by_business, OrderRejected))
    (by_session,) = h.of(refused_by_session, OrderRejected)
    assert by_session.reason.startswith("session reject: ") and "account not permitted" in by_session.reason
    assert "tag 1" in by_session.reason
    (by_business,) = h.of(refused_by_business, OrderRejected)
    assert by_business.reason.startswith("business reject: ") and "trading halted" in by_business.reason
    assert [e.event for e in h.events if isinstance(e, VenueSessionEvent)].count("reject") == 1
    assert h.book.get(refused_by_session).status.value == "REJECTED"


@pytest.mark.parametrize("mass_status", [False, True], ids=["order_status", "mass_status"])
async def test_a_dropped_connection_is_reconciled_on_logon_without_a_duplicate_order(exchange, tmp_path, mass_status):
    port, exchange_log = exchange
    h = Harness(tmp_path, port, mass_status=mass_status)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="DROP")  # filled while we are away
        await h.until(lambda: any(isinstance(e, VenueDisconnected) for e in h.events))
        await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
    kinds = [type(e).__name__ for e in h.events]
    reconnect = kinds.index("VenueDisconnected")
    after = h.events[reconnect:]
    fills = [e for e in after if isinstance(e, OrderFilled)]
    assert len(fills) == 1 and fills[0].last_qty == d("100000")
    assert (fills[0].trade_id, fills[0].cum_qty) == ("", d("100000"))  # no execution id: booked by CumQty
    reconciled = next(e for e in after if isinstance(e, VenueSessionEvent) and e.event == "reconciled")
    # the order is filled before the venue counts as connected again: trading resumes on reconciled state
    assert after.index(fills[0]) < after.index(reconciled) < kinds.index("VenueConnected", reconnect) - reconnect + 1
    assert h.book.get(oid).status.value == "FILLED"
    assert sent_orders(exchange_log, oid) == 1
    # a mass status lists what the counterparty has working: the filled order is asked about on its own
    assert (from_us(exchange_log, "AF"), from_us(exchange_log, "H")) == ((1, 1) if mass_status else (0, 1))


async def test_an_order_that_expired_while_the_connection_was_down_is_reconciled_as_expired(exchange, tmp_path):
    port, _ = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="DROP_EXPIRE")
        await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
    (expired,) = h.of(oid, OrderExpired)
    reconnected = [e for e in h.events if isinstance(e, VenueConnected)][1]
    assert h.events.index(expired) < h.events.index(reconnected)
    assert h.book.get(oid).status.value == "EXPIRED"


@pytest.mark.parametrize("mass_status", [False, True], ids=["order_status", "mass_status"])
async def test_cancel_on_reconnect_asks_the_kernel_to_cancel_what_is_still_working_after_reconciling(
    exchange, tmp_path, mass_status
):
    port, exchange_log = exchange
    h = Harness(tmp_path, port, cancel_on_reconnect=True, mass_status=mass_status)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="DROP_REST")  # still resting after the drop
        await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
        first, again = [e for e in h.events if isinstance(e, VenueConnected)]
        assert first.cancel_working and again.cancel_working  # the policy, on every logon (a restart's too)
        assert h.book.get(oid).is_open  # reconciled as still working: the venue itself canceled nothing
        # the kernel's answer, a CancelOrder it journals first (tests/unit/test_kernel.py), goes out like any other
        h.venue.send(CancelOrder(ts_event=1, ts_init=1, order_id=oid, symbol="EURUSD",
                                 reason="cancel_on_reconnect: venue FIX reconnected"))
        await h.until(lambda: h.of(oid, OrderCanceled))
    reconciled = next(e for e in h.events if isinstance(e, VenueSessionEvent) and e.event == "reconciled")
    assert h.events.index(reconciled) < h.events.index(again) < h.events.index(h.of(oid, OrderCanceled)[0])
    assert h.book.get(oid).status.value == "CANCELED"
    # the mass status listed the working order: no request of its own
    assert (from_us(exchange_log, "AF"), from_us(exchange_log, "H")) == ((1, 0) if mass_status else (0, 1))


async def test_a_counterparty_that_refuses_mass_status_is_asked_order_by_order(tmp_path):
    with Exchange(tmp_path, mass_status=False) as ex:
        # the fallback must not wait for the reconciliation's deadline
        h = Harness(tmp_path, ex.port, mass_status=True, reconcile_timeout=60)
        async with h.running():
            oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="DROP_REST")
            await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
    session = [(e.event, e.detail) for e in h.events if isinstance(e, VenueSessionEvent)]
    refused = [detail for event, detail in session if event == "mass_status_refused"]
    assert len(refused) == 1 and "unsupported message type (380=3)" in refused[0], session
    assert "OrderStatusRequest per working order from now on" in refused[0]
    assert not any(event == "reconciled" and "no status" in detail for event, detail in session)  # answered
    assert h.book.get(oid).is_open and not h.venue.mass_status
    assert (from_us(ex.log, "AF"), from_us(ex.log, "H")) == (1, 1)
    assert not [e for e in h.events if isinstance(e, VenueMessageIgnored)]


async def test_a_restart_continues_the_sequence_and_answers_a_resend_request(exchange, tmp_path):
    port, exchange_log = exchange
    h = Harness(tmp_path, port)
    async with h.running():
        first = h.submit()
        await h.until(lambda: h.of(first, OrderFilled))
    # skip five of our sequence numbers in the persisted store: the exchange will ask us to resend them
    sender, _ = set_seqnums(tmp_path / "store")
    set_seqnums(tmp_path / "store", sender=sender + 5)
    h2 = Harness(tmp_path, port)
    h2.book, h2.seq = h.book, h.seq
    async with h2.running():
        second = h2.submit()
        await h2.until(lambda: h2.of(second, OrderFilled))
    text = "".join(p.read_text() for p in exchange_log.glob("*.messages.current.log"))
    logons = [line for line in text.splitlines() if "\x0135=A\x01" in line and "\x0149=FOXHUNT\x01" in line]
    assert int(logons[-1].split("\x0134=")[1].split("\x01")[0]) == sender + 5  # continued, not reset to 1
    assert "\x0135=2\x01" in text  # the exchange asked for the gap ...
    assert "\x01123=Y\x01" in text  # ... and we answered with a gap fill (orders are never sent twice)
    assert sent_orders(exchange_log, first) == 1


async def test_a_failure_in_our_own_handling_is_recorded_and_the_session_goes_on(exchange, tmp_path, monkeypatch):
    port, _ = exchange
    h = Harness(tmp_path, port)
    real = parsing.execution_report
    calls = []

    def flaky(f, ts):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in foxhunt")
        return real(f, ts)

    monkeypatch.setattr(parsing, "execution_report", flaky)
    async with h.running():
        first = h.submit()
        await h.until(lambda: h.of(first, OrderFilled))
        second = h.submit()
        await h.until(lambda: h.of(second, OrderFilled))
    (ignored,) = [e for e in h.events if isinstance(e, VenueMessageIgnored)]
    assert ignored.reason == "foxhunt failed to handle it: RuntimeError: a bug in foxhunt"
    assert "35=8" in ignored.raw


def test_quickfix_callbacks_are_not_starved_by_a_busy_event_loop(exchange, tmp_path):
    """The loop does Python work in stretches of 2 ms between waits for I/O, as under a burst of market
    data, on uvloop as the daemon runs. With CPython's default GIL switch interval (5 ms) quickfix's
    thread waited up to seconds for the GIL to call us back (session.GIL_SWITCH_S says why); the engine
    lowers the interval."""
    port, _ = exchange
    sys.setswitchinterval(0.005)  # the default, as a fresh daemon has it (an earlier test lowered it)
    h = Harness(tmp_path, port)
    waits: list[float] = []

    async def scenario() -> None:
        async with h.running():
            assert sys.getswitchinterval() == GIL_SWITCH_S
            busy = True

            async def burn() -> None:
                while busy:
                    until = time.perf_counter() + 0.002
                    while time.perf_counter() < until:
                        pass
                    await anyio.sleep(0.0005)

            async with anyio.create_task_group() as tg:
                tg.start_soon(burn)
                for _ in range(10):
                    started = time.perf_counter()
                    oid = h.submit(order_type=OrderType.LIMIT, price="1.0")
                    await h.until(lambda: h.of(oid, OrderAccepted), timeout=60)  # noqa: B023 - awaited at once
                    waits.append(time.perf_counter() - started)
                busy = False

    anyio.run(scenario, backend_options={"use_uvloop": True})
    assert statistics.median(waits) < 0.1, waits  # 21 ms here (the harness polls every 20); starved: 0.2 s


async def test_ten_thousand_messages_under_gc_pressure(exchange, tmp_path):
    port, _ = exchange
    h = Harness(tmp_path, port)
    stop = threading.Event()

    def collect():  # full collections from another thread, a hundred a second, while callbacks run
        while not stop.wait(0.01):
            gc.collect()

    collector = threading.Thread(target=collect, daemon=True)
    old = gc.get_threshold()
    gc.set_threshold(100, 2, 2)  # and the collector itself runs far more often than by default
    collector.start()
    try:
        async with h.running():
            ids = [h.submit() for _ in range(3400)]  # each: order out, accepted and filled back in: 10,200
            await h.until(lambda: all(h.book.get(i).status.value == "FILLED" for i in ids), timeout=180)
    finally:
        stop.set()
        collector.join()
        gc.set_threshold(*old)
    # an order that waited long for its acknowledgement was asked about (ack_timeout), and a status that
    # raced the fill's own report was booked once (tests/venue_harness.py: as the kernel books)
    duplicates = {id(e) for e in h.duplicates}
    assert sum(isinstance(e, OrderFilled) and id(e) not in duplicates for e in h.events) == 3400
    assert not [e for e in h.refused if isinstance(e, OrderFilled)]
    assert not any(isinstance(e, VenueMessageIgnored) for e in h.events)


# --- a counterparty that misbehaves on the wire ------------------------------------------------------


def fix_message(fields: list[tuple[int, str]], checksum: int | None = None) -> bytes:
    body = "".join(f"{t}={v}\x01" for t, v in fields)
    head = f"8=FIX.4.4\x019={len(body)}\x01"
    total = sum((head + body).encode()) % 256 if checksum is None else checksum
    return (head + body + f"10={total:03d}\x01").encode()


class RawCounterparty(threading.Thread):
    """A FIX acceptor written by hand: answers the logon, then sends what the test gives it, valid or not."""

    def __init__(self, messages: list[tuple[int, Callable]], refuse: str | None = None) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.messages = messages
        self.refuse = refuse  # answer the logon with a Logout giving this reason, and hang up
        self.received = b""

    @staticmethod
    def header(seq: int, msg_type: str) -> list[tuple[int, str]]:
        # a current SendingTime: quickfix refuses messages older than its MaxLatency
        return [(35, msg_type), (34, str(seq)), (49, "EXCH"), (52, parsing.utc_timestamp(time.time_ns())),
                (56, "FOXHUNT")]

    def run(self) -> None:
        conn, _ = self.server.accept()
        conn.settimeout(10)
        self.received += conn.recv(4096)  # the logon
        if self.refuse is not None:
            conn.sendall(fix_message([*self.header(1, "5"), (58, self.refuse)]))
            time.sleep(0.2)
            conn.close()
            self.server.close()  # and refuse to be reached again
            return
        with conn, self.server:
            conn.sendall(fix_message([*self.header(1, "A"), (98, "0"), (108, "5")]))
            for seq, make in self.messages:
                conn.sendall(make(seq, self.header))
            try:
                while chunk := conn.recv(4096):
                    self.received += chunk
            except OSError:
                pass


async def test_malformed_and_unexpected_messages_from_the_counterparty_do_not_crash_anything(tmp_path):
    def report(cl_ord_id: str, **extra: str):
        def make(seq, header):
            fields = [*header(seq, "8"), (37, "X9"), (11, cl_ord_id), (17, f"E{seq}"), (150, "0"), (39, "0"),
                      (55, "EURUSD"), (54, "1"), (151, "100000"), (14, "0"), (6, "0")]
            fields = [(t, v) for t, v in fields if str(t) not in extra.get("drop", "").split(",")]
            return fix_message(fields, checksum=int(extra["checksum"]) if "checksum" in extra else None)
        return make

    counterparty = RawCounterparty([  # (MsgSeqNum, message)
        (2, report("t-1-1", checksum="7")),  # bad checksum: quickfix drops it, seq 2 still expected
        (0, lambda seq, header: b"this is not FIX at all\x01\x01"),  # garbage between messages: skipped
        (2, report("t-1-1", drop="150")),  # required tag missing: rejected at the session level
        (3, report("ghost-1")),  # well-formed, for an order foxhunt never sent
    ])
    counterparty.start()
    h = Harness(tmp_path, counterparty.port)
    async with h.running():
        await h.until(lambda: any(isinstance(e, VenueMessageIgnored) for e in h.events)
                      and any(isinstance(e, VenueMessageRejected) for e in h.events))
        await anyio.sleep(0.5)
    ignored = [e for e in h.events if isinstance(e, VenueMessageIgnored)]
    assert [e.reason for e in ignored] == [
        "execution report for an order foxhunt never sent (or forgot, long closed): ClOrdID 'ghost-1'"]
    assert b"\x0135=3\x01" in counterparty.received  # the session-level reject of the message lacking tag 150
    assert b"\x01373=1\x01" in counterparty.received or b"\x01371=150\x01" in counterparty.received
    (rejected,) = [e for e in h.events if isinstance(e, VenueMessageRejected)]  # ... and its trace in the journal
    assert rejected.msg_type == "8" and rejected.tighten is TradingState.HALTED
    assert "required tag missing" in rejected.reason and "|11=t-1-1|" in rejected.raw and "|150=" not in rejected.raw


async def test_a_refused_logon_is_journaled_with_the_counterpartys_reason(tmp_path):
    counterparty = RawCounterparty([], refuse="unknown CompID FOXHUNT")
    counterparty.start()
    h = Harness(tmp_path, counterparty.port)
    async with h.running(connect=False):
        await h.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "logout_received" for e in h.events))
        await anyio.sleep(2.5)  # quickfix goes on trying to log on, once a second, and finds nobody
    refused = [e for e in h.events if isinstance(e, VenueSessionEvent) and e.event == "logout_received"]
    assert [e.detail for e in refused] == ["unknown CompID FOXHUNT"]
    assert not any(isinstance(e, VenueConnected) for e in h.events)  # never trading on a refused session
    assert not any(isinstance(e, VenueDisconnected) for e in h.events)  # it never was up: no event per retry


@pytest.mark.parametrize("password", ["s3cret", "wrong"])
async def test_the_logon_carries_the_configured_credentials_and_fields(tmp_path, password):
    with Exchange(tmp_path, credentials="desk:s3cret") as ex:
        h = Harness(tmp_path, ex.port, logon=[(553, "desk"), (554, password), (8013, "Y")])
        async with h.running(connect=password == "s3cret"):
            if password == "wrong":
                await h.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "logout_received"
                                          for e in h.events))
    assert from_us(ex.log, "A", "553=desk", f"554={password}", "8013=Y") >= 1
    refused = [e.detail for e in h.events if isinstance(e, VenueSessionEvent) and e.event == "logout_received"]
    if password == "s3cret":
        assert refused == []
    else:  # quickfix retries every ReconnectInterval
        assert refused and all(text.endswith("bad username or password") for text in refused), refused
    assert any(isinstance(e, VenueConnected) for e in h.events) == (password == "s3cret")
    assert written_with(tmp_path, password.encode()) == []  # nothing of ours holds it; the exchange's log does
    assert from_us(ex.log, "A", f"554={password}") >= 1


def written_with(base: Path, secret: bytes) -> list[str]:
    """Every file under `base`, the exchange's own files apart, that holds `secret`."""
    ours = [p for p in base.rglob("*") if p.is_file() and not p.relative_to(base).parts[0].startswith("exch-")]
    assert any(p.name.endswith(".messages.current.log") for p in ours)  # the session did write its log
    return [str(p) for p in ours if secret in p.read_bytes()]


async def test_a_password_a_killed_process_left_in_quickfixs_files_is_overwritten_at_the_next_start(tmp_path):
    """A process killed between writing its Logon and the counterparty's answer leaves the password in the
    message log and the store: the next engine overwrites it before it starts, and its own after the logon."""
    with Exchange(tmp_path, credentials="desk:s3cret") as ex:
        (tmp_path / "log").mkdir()
        left = tmp_path / "log" / "FIX.4.4-FOXHUNT-EXCH.messages.backup.1.log"
        left.write_bytes(b"20261202-10:00:00.000 : 8=FIX.4.4\x019=70\x0135=A\x01553=desk\x01554=s3cret\x01"
                         b"925=n3w\x0110=000\x01\n")
        h = Harness(tmp_path, ex.port, logon=[(553, "desk"), (554, "s3cret")])
        async with h.running():
            assert b"s3cret" not in left.read_bytes() and b"n3w" not in left.read_bytes()
            assert b"\x01554=******\x01925=***\x01" in left.read_bytes()  # the same length: nothing moved
            assert written_with(tmp_path, b"s3cret") == []  # this session's Logon too, once answered
            oid = h.submit()
            await h.until(lambda: h.of(oid, OrderFilled))
    assert written_with(tmp_path, b"s3cret") == []


async def test_an_order_the_counterparty_asks_us_to_resend_is_not_sent_twice(tmp_path):
    with Exchange(tmp_path) as ex:
        h = Harness(tmp_path, ex.port)
        async with h.running():
            first = h.submit()
            await h.until(lambda: h.of(first, OrderFilled))
        ex.stop()
        # the exchange lost track of what it received from us: it will ask for everything again
        set_seqnums(tmp_path / "exch-store", target=1)
        ex.start()
        h2 = Harness(tmp_path, ex.port)
        h2.book, h2.seq = h.book, h.seq
        async with h2.running():
            await h2.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "resend_suppressed"
                                       for e in h2.events))
    events = {e.event for e in h2.events if isinstance(e, VenueSessionEvent)}
    assert {"logon", "resend_request", "resend_suppressed"} <= events
    suppressed = next(e for e in h2.events if isinstance(e, VenueSessionEvent) and e.event == "resend_suppressed")
    assert f"11={first}|" in suppressed.detail
    assert sent_orders(ex.log, first) == 1  # the original only


async def test_an_acknowledged_order_the_venue_no_longer_knows_is_reconciled_as_canceled(tmp_path):
    with Exchange(tmp_path) as ex:
        h = Harness(tmp_path, ex.port)
        async with h.running():
            oid = h.submit(order_type=OrderType.LIMIT, price="1.09")
            await h.until(lambda: h.of(oid, OrderAccepted))
            ex.stop()  # its order book goes with it; its message store stays
            ex.start()
            await h.until(lambda: sum(isinstance(e, VenueConnected) for e in h.events) == 2, timeout=30)
    (canceled,) = h.of(oid, OrderCanceled)
    assert canceled.reason == "reconciled: no longer working at the venue: unknown order"
    assert h.book.get(oid).status.value == "CANCELED"  # an acknowledged order cannot become REJECTED


def run_daemon(cli_env, pg_dsn, journal_name: str, strategy: str, state_dir: Path, tmp_path: Path, port: int,
               **fix_options: str) -> subprocess.CompletedProcess:
    """`foxhunt run` trading through the FIX venue against the exchange on `port`, for 6,000 quotes."""
    # the FIX message store (sequence numbers) lives in the state directory: one per test, as each test's
    # exchange starts afresh; the journal database and compiled kernels are the session's
    env = {**cli_env, "FOXHUNT_STATE_DIR": str(tmp_path), "FOXHUNT_DSN": pg_dsn,
           "FOXHUNT_STATE__NUMBA_CACHE_DIR": str(state_dir / "numba-cache"),
           "FOXHUNT_STRATEGY__NAME": strategy, "FOXHUNT_STRATEGY__ZSCORE__ORDER_TTL": "1000000",
           "FOXHUNT_RUN__VENUE": "fix", "FOXHUNT_FIX__TARGET_COMP_ID": "EXCH",
           "FOXHUNT_FIX__PORT": str(port), "FOXHUNT_FIX__RECONNECT_S": "1", "FOXHUNT_ADMIN__ENABLED": "false",
           "FOXHUNT_FIX__MAX_MESSAGES_PER_SECOND": "0",
           **{f"FOXHUNT_FIX__{name.upper()}": value for name, value in fix_options.items()}}
    return subprocess.run(
        [sys.executable, "-m", "foxhunt", "run", "--journal", journal_name, "--feed", "synthetic:n=6000,rate=1500",
         "--json"], env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.postgres
@pytest.mark.parametrize("strategy", ["ema_cross", "zscore"])  # market orders; resting limit orders
def test_the_daemon_trades_through_fix_and_its_journal_verifies(
    cli_env, pg_dsn, journal_name, strategy, state_dir, tmp_path
):
    import json

    # zscore's limit orders rest at this exchange and never expire (a huge ttl), so one is working when the
    # run stops: the stop policy must cancel it and wait for the exchange to confirm
    with Exchange(tmp_path, rest_limits=strategy == "zscore") as ex:
        run = run_daemon(cli_env, pg_dsn, journal_name, strategy, state_dir, tmp_path, ex.port)
    exchange_log = ex.log
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    # orders are denied (VENUE_DISCONNECTED) until the session has logged on, a second or two into the feed
    assert summary["orders"] - summary["denied"] >= (5 if strategy == "ema_cross" else 1), summary
    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                            env=cli_env, capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr[-3000:]
    assert json.loads(verify.stdout)["state_digest"] == summary["state_digest"]
    text = "".join(p.read_text() for p in exchange_log.glob("*.messages.current.log"))
    assert text.count("\x0135=D\x01") == summary["orders"] - summary["denied"]
    if strategy == "zscore":  # limit orders were resting: the stop policy canceled them and waited to hear so
        with psycopg.connect(pg_dsn) as conn:
            kinds = [k for (k,) in conn.execute(
                "SELECT e.kind FROM events e JOIN journals j ON j.id = e.journal_id WHERE j.name = %s ORDER BY e.seq",
                (journal_name,))]
        tail = kinds[kinds.index("AdminCommand"):]
        assert "OrderCanceled" in tail and tail[-1] == "RunStopped"
        assert "\x0135=F\x01" in text


@pytest.mark.postgres
def test_a_report_the_order_lifecycle_does_not_allow_is_journaled_as_refused_and_the_daemon_goes_on(
    cli_env, pg_dsn, journal_name, state_dir, tmp_path
):
    """It reaches the journal before the kernel: were the kernel to raise, the daemon would stop, and stop
    again at every restart, when recovery feeds it the same report."""
    import json

    with Exchange(tmp_path, rest_limits=True) as ex:
        run = run_daemon(cli_env, pg_dsn, journal_name, "zscore", state_dir, tmp_path, ex.port,
                         account="DUPLICATE_ACK")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    with psycopg.connect(pg_dsn) as conn:
        refused = conn.execute(
            "SELECT e.payload FROM events e JOIN journals j ON j.id = e.journal_id"
            " WHERE j.name = %s AND e.kind = 'OrderReportRefused'", (journal_name,)).fetchall()
    reasons = {codec.decode(payload).reason for (payload,) in refused}
    assert len(refused) == summary["orders"] - summary["denied"] >= 1  # one per order
    assert reasons == {"OrderAccepted not allowed for an order in ACCEPTED"}
    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                            env=cli_env, capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr[-3000:]
    assert json.loads(verify.stdout)["state_digest"] == summary["state_digest"]


@pytest.mark.postgres
def test_cancel_on_reconnect_through_the_daemon_cancels_with_journaled_commands_and_verifies(
    cli_env, pg_dsn, journal_name, state_dir, tmp_path
):
    import json

    # every order rests and the exchange then drops the connection (account DROP_REST): each logon after
    # that reconciles a working order (by mass status here), and the policy has the kernel cancel it
    with Exchange(tmp_path, rest_limits=True) as ex:
        run = run_daemon(cli_env, pg_dsn, journal_name, "zscore", state_dir, tmp_path, ex.port,
                         account="DROP_REST", cancel_on_reconnect="true", reconcile_with="mass_status")
    assert run.returncode == 0, run.stderr[-3000:]
    assert from_us(ex.log, "AF") >= 1
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT e.seq, e.causation, e.payload FROM events e JOIN journals j ON j.id = e.journal_id"
            " WHERE j.name = %s ORDER BY e.seq", (journal_name,)).fetchall()
    events = {seq: (causation, codec.decode(payload)) for seq, causation, payload in rows}
    cancels = [(seq, causation, msg) for seq, (causation, msg) in events.items()
               if isinstance(msg, CancelOrder) and msg.reason.startswith("cancel_on_reconnect")]
    assert cancels, "no order was canceled on reconnect"
    for seq, causation, msg in cancels:
        cause = events[causation][1]  # derived from the reconnection, journaled before it was sent
        assert isinstance(cause, VenueConnected) and cause.cancel_working
        # the order became uncertain when the connection dropped, and stayed working through reconciliation
        marked = [s for s, (c, m) in events.items() if isinstance(m, OrdersUncertain) and msg.order_id in m.order_ids]
        assert marked and isinstance(events[events[marked[-1]][0]][1], VenueDisconnected) and marked[-1] < causation
        assert msg.reason == f"cancel_on_reconnect: venue {cause.venue} reconnected"
        assert any(isinstance(m, OrderCanceled) and m.order_id == msg.order_id and s > seq
                   for s, (_, m) in events.items())
    verify = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name, "--verify", "--json"],
                            env=cli_env, capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr[-3000:]
    assert json.loads(verify.stdout)["state_digest"] == json.loads(run.stdout)["state_digest"]


async def test_a_repeated_execution_and_a_report_after_the_end_are_published_and_counted_once(tmp_path):
    """The adapter publishes every report of a known order; the order's own rules (the kernel's) book E1
    once and refuse a second final fill."""
    def fill(exec_id: str, exec_type: str = "F"):
        def make(seq, header):
            return fix_message([*header(seq, "8"), (37, "X1"), (11, "t-1-1"), (17, exec_id), (150, exec_type),
                                (39, "2"), (55, "EURUSD"), (54, "1"), (32, "100000"), (31, "1.1"), (151, "0"),
                                (14, "100000"), (6, "1.1")])
        return make

    counterparty = RawCounterparty([(2, fill("E1")), (3, fill("E1")), (4, fill("E2"))])
    h = Harness(tmp_path, counterparty.port, reconcile_timeout=1.0)  # it never answers the status request
    cmd = SubmitOrder(ts_event=1, ts_init=1, order_id="t-1-1", strategy_id="t", symbol="EURUSD", side=Side.BUY,
                      order_type=OrderType.MARKET, quantity=d("100000"))
    h.track(cmd)  # as if sent before: the counterparty reports on it once logged on
    counterparty.start()
    async with h.running():
        await h.until(lambda: len(h.of("t-1-1", OrderFilled)) == 3)
    assert [f.trade_id for f in h.of("t-1-1", OrderFilled)] == ["E1", "E1", "E2"]
    assert all(f.cum_qty == d("100000") for f in h.of("t-1-1", OrderFilled))
    assert [f.trade_id for f in h.duplicates] == ["E1"] and [f.trade_id for f in h.refused] == ["E2"]
    assert h.book.get("t-1-1").filled_qty == d("100000")
    assert not [e for e in h.events if isinstance(e, VenueMessageIgnored)]


def set_seqnums(store: Path, sender: int | None = None, target: int | None = None) -> tuple[int, int]:
    """Set a quickfix file store's next outgoing (`sender`) and expected incoming (`target`) MsgSeqNum, each
    kept where None; the numbers it had."""
    (seqnums,) = store.glob("*.seqnums")
    had = tuple(int(x) for x in seqnums.read_text().split(":"))
    seqnums.write_text(f"{had[0] if sender is None else sender:010d} : {had[1] if target is None else target:010d}")
    return had[0], had[1]


@pytest.mark.parametrize(("account", "why"), [("BAD_FILL", "incorrect data format for value (373=6)"),
                                              ("BAD_EXEC_TYPE", "value is incorrect (out of range) (373=5)")])
async def test_an_execution_report_the_session_layer_rejects_is_journaled_with_its_raw_text(
    exchange, tmp_path, account, why
):
    """quickfix answers it with a Reject(3), and under FIX it is never sent again: its only trace is ours."""
    port, _ = exchange
    h = Harness(tmp_path, port, on_rejected_execution=TradingState.REDUCING)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account=account)
        await h.until(lambda: any(isinstance(e, VenueMessageRejected) for e in h.events))
    (rejected,) = [e for e in h.events if isinstance(e, VenueMessageRejected)]
    assert rejected.msg_type == "8" and rejected.tighten is TradingState.REDUCING
    assert rejected.reason.startswith(f"refused by foxhunt's session layer: {why}"), rejected.reason
    assert rejected.reason.endswith(f", tag {32 if account == 'BAD_FILL' else 150} (MsgSeqNum 3)"), rejected.reason
    assert f"|11={oid}|" in rejected.raw and "|35=8|" in rejected.raw  # the raw text, from the message log
    assert ("|32=abc|" if account == "BAD_FILL" else "|150=Z|") in rejected.raw
    assert not h.of(oid, OrderFilled) and h.book.get(oid).filled_qty == 0


async def test_an_unacknowledged_order_is_asked_about_and_a_status_of_new_records_its_acknowledgement(
    exchange, tmp_path
):
    port, exchange_log = exchange
    h = Harness(tmp_path, port, ack_timeout=0.5)
    async with h.running():
        oid = h.submit(order_type=OrderType.LIMIT, price="1.09", account="SILENT_ACK")
        await h.until(lambda: h.of(oid, OrderAccepted))
    asked = [e.detail for e in h.events if isinstance(e, VenueSessionEvent) and e.event == "status_requested"]
    assert asked == [f"no acknowledgement of {oid} within 0.5 s"]
    (accepted,) = h.of(oid, OrderAccepted)
    assert accepted.venue_order_id.startswith("X") and h.book.get(oid).status.value == "ACCEPTED"
    assert from_us(exchange_log, "H", f"11={oid}") == 1


async def test_a_logout_foxhunt_sends_is_journaled_with_its_reason(tmp_path):
    """The exchange lost its outgoing sequence numbers: its Logon comes too low, and quickfix logs out
    saying so; the reason a logon failed is in the journal."""
    with Exchange(tmp_path) as ex:
        h = Harness(tmp_path, ex.port)
        async with h.running():
            pass
        ex.stop()
        set_seqnums(tmp_path / "exch-store", sender=1)
        ex.start()
        h2 = Harness(tmp_path, ex.port)
        async with h2.running(connect=False):
            await h2.until(lambda: any(isinstance(e, VenueSessionEvent) and e.event == "logout_sent"
                                       for e in h2.events))
    (logout, *_) = [e for e in h2.events if isinstance(e, VenueSessionEvent) and e.event == "logout_sent"]
    assert "MsgSeqNum too low" in logout.detail, logout.detail
