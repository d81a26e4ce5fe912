"""Order-to-acknowledgement round trip over loopback against a quickfix acceptor (issue 6).

The exchange is tests/fix_exchange.py in its own process (a quickfix SocketAcceptor). The orders are limit
orders that rest, so the acknowledgement is the only answer; with --market they are market orders, which
the exchange acknowledges and fills at once, so the fill's report arrives while the acknowledgement is
being handled. Two clients, interleaved in one run, one order at a time:

- bare: a quickfix SocketInitiator whose fromApp callback sets a threading.Event; the main thread builds
  the NewOrderSingle, sends it with Session.sendToTarget and waits. The floor: two quickfix processes.
- foxhunt: FixVenue on the event loop; `send` translates the command and sends it (the rate limit is off);
  the acknowledgement goes callback -> call_soon_threadsafe -> parsing -> OrderAccepted on the bus, which
  the benchmark reads as the trading loop would.

Both measure from the send call to the acknowledgement in hand. For foxhunt the share spent inside it is
split out: the loop side of `send`, and from quickfix's callback to the published event; the rest is
quickfix, the kernel's sockets and the exchange. The journal is not involved here: with durability
`before_send` each order also waits for one durable commit before `send` (docs/benchmarks.md, issue 3).

    .venv/bin/python bench/fix_round_trip.py [--orders 2000] [--rounds 3] [--market]

With --busy-ms MS the event loop is not idle between orders: a task on it does Python work in stretches of
MS milliseconds with 0.5 ms sleeps between them (a burst of market data); only foxhunt runs (the bare
client has no event loop to keep busy). --gil-switch-ms sets the GIL switch interval once the engine has
started, to measure what the engine's own setting (session.GIL_SWITCH_S) prevents; CPython's default is 5.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import quickfix as fix

from foxhunt.adapters.venues.fix.session import GIL_SWITCH_S, FixEngine, bundled_fix44, settings_text
from foxhunt.adapters.venues.fix.venue import FixVenue
from foxhunt.core.orders import Order, Orders
from foxhunt.messages.base import Input, parse_fixed
from foxhunt.messages.orders import OrderAccepted, OrderSubmitted, OrderType, Side, SubmitOrder
from foxhunt.runtime.bus import DEFAULT_CAPACITY

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_exchange(base: Path, port: int, sender: str) -> subprocess.Popen:
    cfg = base / f"exchange-{sender}.cfg"
    cfg.write_text("\n".join([
        "[DEFAULT]", "ConnectionType=acceptor", f"SocketAcceptPort={port}", f"FileStorePath={base / 'x-store'}",
        f"FileLogPath={base / 'x-log'}", "NonStopSession=Y", "SocketNodelay=Y", "UseDataDictionary=Y",
        f"DataDictionary={bundled_fix44()}", "", "[SESSION]", "BeginString=FIX.4.4", "SenderCompID=EXCH",
        f"TargetCompID={sender}", "",
    ]))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fix_exchange.py"), str(cfg)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "exchange: listening"
    return proc


def client_settings(base: Path, port: int, sender: str) -> Path:
    path = base / f"{sender}.cfg"
    path.write_text(settings_text(sender=sender, target="EXCH", host="127.0.0.1", port=port, heartbeat_s=30,
                                  reconnect_s=1, reset_on_logon=True, store_dir=base / f"{sender}-store",
                                  log_dir=base / f"{sender}-log", data_dictionary=bundled_fix44()))
    return path


class Bare(fix.Application):
    def __init__(self) -> None:
        super().__init__()
        self.logged_on = threading.Event()
        self.acked = threading.Event()

    def onCreate(self, sid): pass  # noqa: E704, N802
    def onLogon(self, sid): self.logged_on.set()  # noqa: E704, N802
    def onLogout(self, sid): pass  # noqa: E704, N802
    def toAdmin(self, m, sid): pass  # noqa: E704, N802
    def fromAdmin(self, m, sid): pass  # noqa: E704, N802
    def toApp(self, m, sid): pass  # noqa: E704, N802

    def fromApp(self, m, sid):  # noqa: N802
        if "\x01150=0\x01" in m.toString():
            self.acked.set()


def order_fields(market: bool) -> tuple[tuple[int, str], ...]:
    """OrdType(40) and Price(44) of the benchmark's orders: a buy at 1.0 rests; a market order fills."""
    return ((40, "1"),) if market else ((40, "2"), (44, "1.0"))


def bare_round_trips(base: Path, port: int, n: int, market: bool) -> list[float]:
    settings = fix.SessionSettings(str(client_settings(base, port, "BARE")))
    app = Bare()
    initiator = fix.SocketInitiator(app, fix.FileStoreFactory(settings), settings, fix.FileLogFactory(settings))
    initiator.start()
    app.logged_on.wait(10)
    sid = fix.SessionID("FIX.4.4", "BARE", "EXCH")
    out = []
    for i in range(n):
        app.acked.clear()
        started = time.perf_counter()
        m = fix.Message()
        m.getHeader().setField(fix.BeginString("FIX.4.4"))
        m.getHeader().setField(fix.MsgType("D"))
        for tag, value in ((11, f"b{i}"), (55, "EURUSD"), (54, "1"), (60, "20261201-00:00:00.000"), (38, "1000"),
                           *order_fields(market), (59, "1")):
            m.setField(tag, value)
        fix.Session.sendToTarget(m, sid)
        app.acked.wait(5)
        out.append(time.perf_counter() - started)
    initiator.stop()
    return out


async def foxhunt_round_trips(
    base: Path, port: int, n: int, market: bool, busy_ms: float = 0.0, gil_switch_ms: float | None = None
) -> tuple[list[float], list[float], list[float]]:
    book = Orders()
    engine = FixEngine(client_settings(base, port, "FOXHUNT"), "FOXHUNT", "EXCH", max_per_second=0)
    venue = FixVenue("FIX", engine, lambda: book.by_id)
    bus, reports = anyio.create_memory_object_stream[Input](DEFAULT_CAPACITY)  # read here, as the trading loop would
    inbound: list[float] = []
    original = venue._translate

    def translate(item):  # measures from quickfix's callback to the translated event, then passes it on
        events = original(item)
        for e in events:
            if isinstance(e, OrderAccepted):
                inbound.append(time.time_ns() / 1e9 - item[2] / 1e9)
        return events

    venue._translate = translate

    async def busy() -> None:  # Python work in stretches of busy_ms, between short waits for I/O
        while True:
            until = time.perf_counter() + busy_ms / 1000
            while time.perf_counter() < until:
                pass
            await anyio.sleep(0.0005)

    trips, sends = [], []
    async with anyio.create_task_group() as tg:
        await tg.start(venue.run, bus)
        while not venue.connected:
            await anyio.sleep(0.01)
        if gil_switch_ms is not None:
            sys.setswitchinterval(gil_switch_ms / 1000)
        if busy_ms:
            tg.start_soon(busy)
        for i in range(n):
            cmd = SubmitOrder(ts_event=1, ts_init=time.time_ns(), order_id=f"f{i}", strategy_id="b", symbol="EURUSD",
                              side=Side.BUY, order_type=OrderType.MARKET if market else OrderType.LIMIT,
                              quantity=parse_fixed("1000"), price=None if market else parse_fixed("1.0"))
            book.add(Order.from_command(cmd))
            book.apply(cmd.order_id, OrderSubmitted(ts_event=1, ts_init=1, order_id=cmd.order_id, symbol="EURUSD"))
            started = time.perf_counter()
            venue.send(cmd)
            sends.append(time.perf_counter() - started)
            while not isinstance(await reports.receive(), OrderAccepted):
                pass
            trips.append(time.perf_counter() - started)
        tg.cancel_scope.cancel()
    return trips, sends, inbound


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1e6 if q < 100 else max(values) * 1e6


def busy_round_trips(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        port = free_port()
        exchange = start_exchange(base, port, "FOXHUNT")
        trips: list[float] = []
        try:
            for _ in range(args.rounds):
                t, _, _ = anyio.run(foxhunt_round_trips, base, port, args.orders, args.market, args.busy_ms,
                                    args.gil_switch_ms, backend_options={"use_uvloop": True})
                trips += t
        finally:
            exchange.stdin.close()
            exchange.wait(10)
    print(f"orders={args.orders} x rounds={args.rounds}, loop busy in {args.busy_ms} ms stretches, GIL switch interval "
          f"{sys.getswitchinterval() * 1000:g} ms; foxhunt round trip p50 {pct(trips, 50):,.0f}  p90 {pct(trips, 90):,.0f}"
          f"  p99 {pct(trips, 99):,.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--market", action="store_true", help="market orders, filled at once (default: resting limits)")
    parser.add_argument("--busy-ms", type=float, default=0.0, help="keep the event loop busy in stretches of this")
    parser.add_argument("--gil-switch-ms", type=float, default=None, help="GIL switch interval once the engine started")
    args = parser.parse_args()
    if args.busy_ms:
        busy_round_trips(args)
        return
    sys.setswitchinterval(GIL_SWITCH_S)  # what FixEngine.start sets: both clients run with it from the first round
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        bare_port, fox_port = free_port(), free_port()
        exchanges = [start_exchange(base, bare_port, "BARE"), start_exchange(base / "f", fox_port, "FOXHUNT")] \
            if (base / "f").mkdir() is None else []
        bare, fox, sends, inbound = [], [], [], []
        try:
            for _ in range(args.rounds):  # interleaved: the machine's noise hits both
                bare += bare_round_trips(base, bare_port, args.orders, args.market)
                t, s, i = anyio.run(foxhunt_round_trips, base / "f", fox_port, args.orders, args.market,
                                    backend_options={"use_uvloop": True})
                fox, sends, inbound = fox + t, sends + s, inbound + i
        finally:
            for proc in exchanges:
                proc.stdin.close()
                proc.wait(10)
    kind = "market orders, filled at once" if args.market else "resting limit orders"
    print(f"orders={args.orders} x rounds={args.rounds}, {kind}, one at a time, loopback; microseconds")
    for name, values in (("bare quickfix", bare), ("foxhunt", fox), ("  foxhunt send()", sends),
                         ("  foxhunt callback->event", inbound)):
        print(f"{name:<28} p50 {pct(values, 50):8.1f}  p99 {pct(values, 99):8.1f}")
    inside = statistics.median(sends) + statistics.median(inbound)
    print(f"foxhunt p50 / bare p50: {statistics.median(fox) / statistics.median(bare):.2f}; inside foxhunt at p50: "
          f"{inside * 1e6:.1f} us of {statistics.median(fox) * 1e6:.1f} ({inside / statistics.median(fox) * 100:.0f}%)")


if __name__ == "__main__":
    main()
