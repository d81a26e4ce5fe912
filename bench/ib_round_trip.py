"""Order-to-status round trip against the TWS-protocol server over loopback (issue 7).

The server is tests/tws_server.py in its own process (as TWS or IB Gateway would be). One limit order at
a time that rests (so the answer is openOrder and orderStatus Submitted, then nothing), timed from the
send call to the status in hand, for two clients interleaved in one run:

- bare ib_async: `IB.placeOrder`, then wait for the trade's statusEvent;
- foxhunt: `IbVenue.send` (translate the command, `IB.placeOrder`), then read the bus the venue publishes
  on until `OrderAccepted` comes, as the trading loop would.

    .venv/bin/python bench/ib_round_trip.py [--orders 2000] [--rounds 3]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
from ib_async import IB, Forex, LimitOrder

from foxhunt.adapters.venues.ib.venue import IbContract, IbVenue
from foxhunt.core.orders import Order, Orders
from foxhunt.messages.base import Input, parse_fixed
from foxhunt.messages.market import Instrument
from foxhunt.messages.orders import OrderAccepted, OrderSubmitted, OrderType, Side, SubmitOrder
from foxhunt.runtime.bus import DEFAULT_CAPACITY

ROOT = Path(__file__).resolve().parents[1]
EURUSD = Instrument(symbol="EURUSD", tick_size=parse_fixed("0.00005"), lot_size=parse_fixed("1"), currency="USD")


async def bare(port: int, n: int) -> list[float]:
    ib = IB()
    ib.client.MaxRequests = 0  # one at a time: IB's pacing never binds, and the throttle's bookkeeping is left out
    await ib.connectAsync("127.0.0.1", port, clientId=11)
    [contract] = await ib.qualifyContractsAsync(Forex("EURUSD"))
    out = []
    for _ in range(n):
        started = time.perf_counter()
        trade = ib.placeOrder(contract, LimitOrder("BUY", 20000, 1.0))
        while trade.orderStatus.status != "Submitted":
            await trade.statusEvent
        out.append(time.perf_counter() - started)
    ib.disconnect()
    return out


async def foxhunt(port: int, n: int) -> list[float]:
    book = Orders()
    bus, reports = anyio.create_memory_object_stream[Input](DEFAULT_CAPACITY)  # read here, as the trading loop would
    ib = IB()
    ib.client.MaxRequests = 0
    venue = IbVenue("IB", ib, "127.0.0.1", port, 12, {"EURUSD": IbContract(EURUSD, "CASH")}, lambda: book.by_id)
    task = asyncio.create_task(venue.run(bus))
    while not venue.connected:
        await asyncio.sleep(0.01)
    out = []
    for i in range(n):
        cmd = SubmitOrder(ts_event=1, ts_init=1, order_id=f"b-{i}", strategy_id="b", symbol="EURUSD", side=Side.BUY,
                          order_type=OrderType.LIMIT, quantity=parse_fixed("20000"), price=parse_fixed("1.0"))
        book.add(Order.from_command(cmd))
        book.apply(cmd.order_id, OrderSubmitted(ts_event=1, ts_init=1, order_id=cmd.order_id, symbol="EURUSD"))
        started = time.perf_counter()
        venue.send(cmd)
        while not isinstance(msg := await reports.receive(), OrderAccepted):
            pass
        out.append(time.perf_counter() - started)
        book.apply(msg.order_id, msg)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "tws_server.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    b, f = [], []
    try:
        for _ in range(args.rounds):
            b += asyncio.run(bare(port, args.orders))
            f += asyncio.run(foxhunt(port, args.orders))
    finally:
        server.stdin.close()
        server.wait(10)
    print(f"orders={args.orders} x rounds={args.rounds}, one at a time, loopback; microseconds")
    for name, values in (("bare ib_async", b), ("foxhunt IbVenue", f)):
        print(f"{name:<18} p50 {pct(values, 50):8.1f}  p99 {pct(values, 99):8.1f}")
    print(f"foxhunt p50 / bare p50: {statistics.median(f) / statistics.median(b):.2f}")


if __name__ == "__main__":
    main()
