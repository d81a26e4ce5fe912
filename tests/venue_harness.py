"""What the tests of a real venue (FIX, Interactive Brokers) share: the venue running and publishing on a
bus (a bounded memory stream, as the daemon's), an order book kept by the real order state machine
(core/orders.py) as the kernel keeps it (a fill booked once, a report the lifecycle does not allow
refused), and every input the venue published."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from foxhunt.core.orders import Order, Orders, booked, duplicate, refusal
from foxhunt.messages.base import Input
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
    OrderSubmitted,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
)
from foxhunt.messages.system import VenueConnected
from foxhunt.runtime.bus import DEFAULT_CAPACITY

ORDER_EVENTS = (OrderAccepted, OrderCanceled, OrderCancelRejected, OrderExpired, OrderFilled, OrderPartiallyFilled,
                OrderRejected, OrderReplaced)


class VenueHarness:
    venue: object  # set by the subclass: the venue under test
    default_qty = "100000"

    def __init__(self) -> None:
        self.book = Orders()
        self.events: list[Input] = []
        self.duplicates: list[Input] = []  # fills the book had booked already (the kernel's DuplicateFillIgnored)
        self.refused: list[Input] = []  # reports the lifecycle does not allow (the kernel's OrderReportRefused)
        self.seq = 0

    def record(self, msg: Input) -> None:
        """The venue's input, as the kernel admits it (Kernel._on_fill, _on_report)."""
        self.events.append(msg)
        if not isinstance(msg, ORDER_EVENTS):
            return
        order = self.book.by_id.get(msg.order_id)
        if isinstance(msg, (OrderFilled, OrderPartiallyFilled)) and order is not None:
            if duplicate(order, msg):
                self.duplicates.append(msg)
                return
            msg = booked(order, msg)
        if refusal(order, msg):
            self.refused.append(msg)
            return
        self.book.apply_to(order, msg)

    async def consume(self, bus: MemoryObjectReceiveStream[Input]) -> None:
        async for msg in bus:
            self.record(msg)

    @contextlib.asynccontextmanager
    async def running(self, connect: bool = True):
        """The venue running and publishing on a bus that this harness reads, connected and reconciled
        (unless `connect` is false); stopped (and disconnected) on the way out."""
        send, receive = anyio.create_memory_object_stream[Input](DEFAULT_CAPACITY)
        async with send, receive, anyio.create_task_group() as tg:
            tg.start_soon(self.consume, receive)
            await tg.start(self.venue.run, send)
            if connect:
                await self.connected()
            yield
            tg.cancel_scope.cancel()

    async def connected(self) -> None:
        await self.until(lambda: any(isinstance(e, VenueConnected) for e in self.events))

    def track(self, cmd: SubmitOrder) -> None:
        """An order the kernel approved: in the book, submitted."""
        self.book.add(Order.from_command(cmd))
        self.book.apply(cmd.order_id, OrderSubmitted(ts_event=1, ts_init=1, order_id=cmd.order_id, symbol=cmd.symbol))

    def submit(self, symbol: str = "EURUSD", qty: str | None = None, order_type=OrderType.MARKET, price=None) -> str:
        self.seq += 1
        cmd = SubmitOrder(ts_event=1, ts_init=1, order_id=f"t-{self.seq}-1", strategy_id="t", symbol=symbol,
                          side=Side.BUY, order_type=order_type, quantity=d(qty or self.default_qty),
                          price=None if price is None else d(price))
        self.track(cmd)
        self.send(cmd)
        return cmd.order_id

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> None:
        """A command to the venue; what it answers at once (a simulated venue's reports) is recorded as the
        loop records it, and a real venue's answers come on the bus."""
        for msg in self.venue.send(cmd):
            self.record(msg)

    def of(self, order_id: str, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind) and getattr(e, "order_id", None) == order_id]

    async def until(self, condition: Callable[[], bool], timeout: float = 15) -> None:
        with anyio.fail_after(timeout):
            while not condition():
                await anyio.sleep(0.02)
