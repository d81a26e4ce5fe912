"""A small server that speaks the TWS API wire protocol, for the Interactive Brokers tests.

Built from the protocol as ib_async's client.py and decoder.py show it (ib_async 2.1.0, server version
176): the client opens with b"API\\0" and a length-prefixed version range "v157..178"; the server answers
with its version and connection time; after that every message, both ways, is a 4-byte big-endian
length and NUL-terminated fields, the first the message id. At start-up ib_async sends startApi and
waits for managed accounts and the next valid order id, then synchronises positions, open and completed
orders, account updates and executions, each answered with its end marker here.

The exchange behind it: contract details for EURUSD (CASH, IDEALPRO), AAPL (STK, SMART) and ESZ6 (FUT,
CME), error 200 for anything else. A market order is filled at once at the last price; a limit order is
filled when it crosses the last price, else it rests; an order for 666 units is rejected (error 201).
A cancel cancels a resting order (error 202 with orderStatus Cancelled). reqMktData answers bid, ask,
last and sizes. `drop()` cuts every connection; `fill_resting()` fills resting orders while no client is
connected, so a reconnecting client must find out through reqExecutions and reqOpenOrders, which report
every execution of the day again (a restarted client hears of the ones it booked before, too);
`execute_resting()` executes part of them while a client is connected; `misreport_resting()` reports an
execution that never was; `ghost_execution()` reports one of an order the client never placed;
`error_resting()` sends an error about them that does not end them; `flood_status()` sends a flood of
order statuses; `muted` stops answering requests (a hung gateway); `commission_delay` sends each
commission report that much after its execution.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import struct
import sys
import time
from dataclasses import dataclass, field

SERVER_VERSION = 176
ACCOUNT = "DU1234567"
CONTRACTS = {  # symbol -> (conId, secType, exchange, currency, minTick, lastTradeDate, multiplier)
    "EURUSD": (12087792, "CASH", "IDEALPRO", "USD", "0.00005", "", ""),
    "GBPUSD": (12087797, "CASH", "IDEALPRO", "USD", "0.00005", "", ""),
    "USDJPY": (15016059, "CASH", "IDEALPRO", "JPY", "0.005", "", ""),
    "AAPL": (265598, "STK", "SMART", "USD", "0.01", "", ""),
    "ESZ6": (495512563, "FUT", "CME", "USD", "0.25", "20261218", "50"),
}
PRICES = {"EURUSD": 1.1, "GBPUSD": 1.27, "USDJPY": 150.0, "AAPL": 190.0, "ESZ6": 6000.0}


@dataclass
class Order:
    order_id: int
    client_id: int
    symbol: str
    action: str
    qty: float
    order_type: str
    limit: float
    order_ref: str = ""
    status: str = "Submitted"
    filled: float = 0.0
    avg: float = 0.0
    perm_id: int = 0
    executions: list[tuple[str, float, float]] = field(default_factory=list)  # (execId, qty, price)


def _key(symbol: str, sec_type: str, currency: str) -> str:
    """Our name of a contract: a currency pair is its two currencies (IB's CASH contract EUR in USD)."""
    return symbol + currency if sec_type == "CASH" else symbol


def frame(*fields: object) -> bytes:
    body = "".join(f"{f}\0" for f in fields).encode()
    return struct.pack(">I", len(body)) + body


class TwsServer:
    def __init__(self, stream_rate: float = 0.0) -> None:
        self.stream_rate = stream_rate  # quotes a second per subscription after the first (0: none)
        self.tasks: set[asyncio.Task] = set()
        self.orders: dict[int, Order] = {}
        self.ids = itertools.count(1)
        self.next_order_id = 1
        self.received: list[tuple[float, list[str]]] = []  # (monotonic time, fields) of every client message
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.muted = False  # take requests and answer none
        self.commission_delay = 0.0  # seconds each commission report comes after its execution

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.drop()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def drop(self) -> None:
        for writer in list(self.writers):
            writer.close()
        self.writers.clear()

    def fill_resting(self) -> None:
        for o in self.orders.values():
            if o.status == "Submitted":
                self._execute(o, o.qty - o.filled, o.limit or PRICES[o.symbol], writer=None)

    def execute_resting(self, fraction: float, shares: float | str | None = None) -> None:
        """Execute `fraction` of each resting order now, reported to the connected client; `shares`, if given,
        is what the execution report says instead (say nan, or "abc", as a broken gateway might)."""
        (writer,) = self.writers
        for o in self.orders.values():
            if o.status == "Submitted":
                self._execute(o, o.qty * fraction, o.limit or PRICES[o.symbol], writer, shares)

    def misreport_resting(self, shares: float) -> None:
        """Report an execution of `shares` (and as much cumulative) for each resting order, which goes on
        resting as it was: a broker's mistake, as an overfill."""
        (writer,) = self.writers
        for o in self.orders.values():
            if o.status == "Submitted":
                o.executions.append((f"0000e0d5.{next(self.ids):08d}.01.01", shares, o.limit or PRICES[o.symbol]))
                self._exec_details(o, o.executions[-1][0], shares, o.executions[-1][2], writer, "-1")
                o.executions.pop()  # never done: the order and its executions stay as they were

    def ghost_execution(self, order_id: int, shares: float, order_ref: str = "") -> str:
        """An execution, reported live, of an order the connected client never placed (a manual order, another
        client's, a broker's mistake); its execution id."""
        (writer,) = self.writers
        o = Order(order_id, 0, "EURUSD", "BUY", shares, "MKT", 0.0, order_ref=order_ref, status="Filled",
                  filled=shares, avg=PRICES["EURUSD"], perm_id=next(self.ids) + 20_000)
        exec_id = f"0000e0d5.{next(self.ids):08d}.01.01"
        o.executions.append((exec_id, shares, PRICES["EURUSD"]))
        self._exec_details(o, exec_id, shares, PRICES["EURUSD"], writer, "-1")
        return exec_id

    def error_resting(self, code: int, text: str) -> None:
        """An error message (4) about each resting order, which goes on resting: as TWS sends 10147 for a
        cancel it could not match, or 462 for a modification it refused."""
        for o in self.orders.values():
            if o.status == "Submitted":
                self.send_raw(frame(4, 2, o.order_id, code, text, ""))

    def flood_status(self, n: int) -> None:
        """`n` order statuses for each resting order, each a little different (its last fill price), as a
        broker in trouble may send them."""
        (writer,) = self.writers
        for o in self.orders.values():
            if o.status == "Submitted":
                for i in range(n):
                    writer.write(frame(3, o.order_id, o.status, o.filled, o.qty - o.filled, o.avg, o.perm_id, 0,
                                       1 + i / 1e6, o.client_id, "", 0))

    def send_raw(self, data: bytes) -> None:
        for writer in self.writers:
            writer.write(data)

    # --- connection ----------------------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            assert await reader.readexactly(4) == b"API\0"
            await self._message(reader)  # "v157..178": the client's version range
            writer.write(frame(SERVER_VERSION, time.strftime("%Y%m%d %H:%M:%S UTC", time.gmtime())))
            while True:
                fields = await self._message(reader)
                self.received.append((time.monotonic(), fields))
                if not self.muted:
                    self._handle(fields, writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went, or the test ends: nothing more to serve
        finally:
            self.writers.discard(writer)
            writer.close()

    @staticmethod
    async def _message(reader: asyncio.StreamReader) -> list[str]:
        (length,) = struct.unpack(">I", await reader.readexactly(4))
        return (await reader.readexactly(length)).decode().split("\0")[:-1]

    # --- requests ------------------------------------------------------------------------------------

    def _handle(self, f: list[str], w: asyncio.StreamWriter) -> None:
        match int(f[0]):
            case 71:  # startApi: version, clientId, capabilities
                self.client_id = int(f[2])
                w.write(frame(15, 1, ACCOUNT))
                w.write(frame(9, 1, self.next_order_id))
            case 61:
                w.write(frame(62, 1))  # positionEnd
            case 5:  # reqOpenOrders: every working order, then the end marker
                for o in self.orders.values():
                    if o.status == "Submitted":
                        self._open_order(o, w)
                        self._status(o, w)
                w.write(frame(53, 1))
            case 99:
                w.write(frame(102))  # completedOrdersEnd
            case 6:
                w.write(frame(54, 1, f[3]))  # accountDownloadEnd
            case 76:
                w.write(frame(74, 1, f[2]))  # accountUpdateMultiEnd
            case 7:  # reqExecutions: every execution so far, then the end marker
                req_id = f[2]
                for o in self.orders.values():
                    for exec_id, qty, price in o.executions:
                        self._exec_details(o, exec_id, qty, price, w, req_id)
                w.write(frame(55, 1, req_id))
            case 8:
                w.write(frame(9, 1, self.next_order_id))
            case 9:
                self._contract_details(f, w)
            case 3:
                self._place(f, w)
            case 4:
                self._cancel(int(f[2]), w)
            case 1:
                self._market_data(f, w)
            case 49:  # reqCurrentTime
                w.write(frame(49, 1, int(time.time())))
            case 15 | 2:  # reqAutoOpenOrders, cancelMktData
                pass

    def _contract_details(self, f: list[str], w: asyncio.StreamWriter) -> None:
        req_id, symbol = f[2], _key(f[4], f[5], f[12])
        if symbol not in CONTRACTS:
            w.write(frame(4, 2, req_id, 200, "No security definition has been found for the request", ""))
            return
        con_id, sec_type, exchange, currency, tick, last, mult = CONTRACTS[symbol]
        local = f"{symbol[:3]}.{symbol[3:]}" if sec_type == "CASH" else symbol
        base = symbol[:3] if sec_type == "CASH" else symbol
        w.write(frame(
            10, req_id, base, sec_type, last, "0", "", exchange, currency, local, local, local, con_id, tick,
            mult, "LMT,MKT,STP", exchange, 1, 0, symbol, "", "", "", "", "", "UTC", "", "", "", "", 0,
            1, "", "", "26", last, "", "1", "1", "1",
        ))
        w.write(frame(52, 1, req_id))

    def _place(self, f: list[str], w: asyncio.StreamWriter) -> None:
        order_id, symbol = int(f[1]), _key(f[3], f[4], f[11])
        action, qty, order_type, limit = f[16], float(f[17]), f[18], float(f[19] or 0)
        self.next_order_id = max(self.next_order_id, order_id + 1)
        if order_id in self.orders:  # a modification
            o = self.orders[order_id]
            o.qty, o.limit = qty, limit
            self._open_order(o, w)  # TWS confirms a modification with the order as it now stands
            self._status(o, w)
            self._match(o, w)
            return
        o = Order(order_id, self.client_id, symbol, action, qty, order_type, limit, order_ref=f[26],
                  perm_id=next(self.ids) + 10_000)
        self.orders[order_id] = o
        if qty == 666 or symbol not in CONTRACTS:
            o.status = "Inactive"
            w.write(frame(4, 2, order_id, 201, "Order rejected - reason:quantity 666 is not allowed", ""))
            self._status(o, w)
            return
        self._open_order(o, w)
        self._status(o, w)
        self._match(o, w)

    def _match(self, o: Order, w: asyncio.StreamWriter) -> None:
        last = PRICES[o.symbol]
        crosses = o.order_type == "MKT" or (o.action == "BUY" and o.limit >= last) or (o.action == "SELL" and o.limit <= last)
        if crosses and o.status == "Submitted":
            self._execute(o, o.qty - o.filled, last if o.order_type == "MKT" else o.limit, w)

    def _execute(self, o: Order, qty: float, price: float, writer: asyncio.StreamWriter | None,
                 reported: float | str | None = None) -> None:
        exec_id = f"0000e0d5.{next(self.ids):08d}.01.01"
        o.avg = (o.avg * o.filled + price * qty) / (o.filled + qty)
        o.filled += qty
        o.status = "Filled" if o.filled >= o.qty else "Submitted"
        o.executions.append((exec_id, qty, price))
        if writer is not None:
            self._exec_details(o, exec_id, qty if reported is None else reported, price, writer, "-1")
            self._status(o, writer)

    def _exec_details(self, o: Order, exec_id: str, qty: float, price: float, w: asyncio.StreamWriter,
                      req_id: str) -> None:
        con_id, sec_type, exchange, currency, _, last, mult = CONTRACTS[o.symbol]
        side = "BOT" if o.action == "BUY" else "SLD"
        ib_symbol = o.symbol[:3] if sec_type == "CASH" else o.symbol
        cum = sum(q for _, q, _ in o.executions[: [e[0] for e in o.executions].index(exec_id) + 1])
        w.write(frame(
            11, req_id, o.order_id, con_id, ib_symbol, sec_type, last, "0", "", mult, exchange, currency, o.symbol,
            o.symbol, exec_id, time.strftime("%Y%m%d %H:%M:%S", time.gmtime()), ACCOUNT, exchange, side, qty,
            price, o.perm_id, o.client_id, 0, cum, o.avg, o.order_ref, "", "", "", 2,
        ))
        charged = qty if isinstance(qty, (int, float)) else 0.0  # a misreported quantity ("abc") is charged nothing
        report = frame(59, 1, exec_id, round(charged * price * 0.00002, 6), currency, "", "", "")
        if self.commission_delay:
            asyncio.get_running_loop().call_later(self.commission_delay, w.write, report)
        else:
            w.write(report)

    def _open_order(self, o: Order, w: asyncio.StreamWriter) -> None:
        """openOrder (5) as decoder.openOrder reads it at server version 176: the order, then many fields
        this exchange leaves empty, with zero counts for legs, parameters and conditions."""
        con_id, sec_type, exchange, currency, _, last, mult = CONTRACTS[o.symbol]
        ib_symbol = o.symbol[:3] if sec_type == "CASH" else o.symbol
        w.write(frame(
            5, o.order_id, con_id, ib_symbol, sec_type, last, "0", "", mult, exchange, currency, o.symbol, o.symbol,
            o.action, o.qty, o.order_type, o.limit, "", "GTC", "", ACCOUNT, "O", 0, o.order_ref, o.client_id,
            o.perm_id, 0, 0, 0, "", "", "", "", "", "",  # ... discretionaryAmt, goodAfterTime, -, fa*, faProfile
            "", "", "", "", "", 0, "", "", 0, "", "", "", "", "", "", 0, 0, 0, "", 0, 0, 0, "", 0, 0, "", 0, "", "",
            0, 0, "", "", "", 0, "",  # continuousUpdate ... comboLegsDescrip
            0, 0, 0,  # combo legs, order combo legs, smart routing parameters
            "", "", "",  # scale init level size, subs level size, price increment
            "",  # hedge type
            0, "", "", 0, 0,  # optOutSmartRouting, clearing account and intent, notHeld, no delta-neutral contract
            "",  # algo strategy
            0, 0, o.status, "", "", "", "", "", "", "", "", "", "", "", "", "", "", 0, 0,  # ... order state
            0,  # conditions
            "", "", "", "", "", "", "", 0, "", "", "", "", 0, 0, "", 0,  # adjusted orders ... usePriceMgmtAlgo
            "", 0, 0,  # duration, postToAts, autoCancelParent
            "", "", "", "", "",  # minTradeQty ... midOffsetAtHalf
        ))

    def _status(self, o: Order, w: asyncio.StreamWriter) -> None:
        last = o.executions[-1][2] if o.executions else 0
        w.write(frame(3, o.order_id, o.status, o.filled, o.qty - o.filled, o.avg, o.perm_id, 0, last,
                      o.client_id, "", 0))

    def _cancel(self, order_id: int, w: asyncio.StreamWriter) -> None:
        o = self.orders.get(order_id)
        if o is None or o.status != "Submitted":
            w.write(frame(4, 2, order_id, 10148, f"OrderId {order_id} that needs to be cancelled cannot be "
                                                 f"cancelled, state: {o.status if o else 'unknown'}.", ""))
            return
        o.status = "Cancelled"
        w.write(frame(4, 2, order_id, 202, "Order Canceled - reason:", ""))
        self._status(o, w)

    def _market_data(self, f: list[str], w: asyncio.StreamWriter) -> None:
        req_id, symbol = f[2], _key(f[4], f[5], f[12])
        price = PRICES.get(symbol)
        if price is None:
            w.write(frame(4, 2, req_id, 200, "No security definition has been found for the request", ""))
            return
        spread = 0.0001 if symbol == "EURUSD" else 0.01
        for tick_type, p, size in ((1, price - spread, 5_000_000), (2, price + spread, 3_000_000), (4, price, 100)):
            w.write(frame(1, 6, req_id, tick_type, p, size, 0))
        if self.stream_rate:
            task = asyncio.get_running_loop().create_task(self._stream(req_id, symbol, w))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _stream(self, req_id: str, symbol: str, w: asyncio.StreamWriter) -> None:
        """A seeded random walk of the price, as bid and ask ticks, until the client goes."""
        rng = random.Random(7)
        tick = float(CONTRACTS[symbol][4])
        while not w.is_closing():
            await asyncio.sleep(1 / self.stream_rate)
            price = PRICES[symbol] = round(PRICES[symbol] + rng.choice((-1, 0, 1)) * tick, 5)
            w.write(frame(1, 6, req_id, 1, round(price - tick, 5), rng.randrange(1, 50) * 100_000, 0))
            w.write(frame(1, 6, req_id, 2, round(price + tick, 5), rng.randrange(1, 50) * 100_000, 0))


async def main() -> None:
    """As a subprocess: `python tests/tws_server.py [QUOTES_PER_SECOND]`; prints the port, serves until
    stdin closes."""
    server = TwsServer(stream_rate=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
    await server.start()
    print(server.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
