"""What every venue on the other end of a connection (FIX, Interactive Brokers) has in common."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.messages.base import Input
from foxhunt.messages.market import MarketData
from foxhunt.messages.system import VenueDisconnected


class RemoteVenue:
    """Reports arrive later, from `run`; working orders outlive foxhunt and are reconciled after each
    connection; the venue is down until its session is up and reconciled (then `run` publishes
    VenueConnected), so the kernel holds orders for it meanwhile."""

    name: str
    now: Callable[[], int]  # the run's clock (Clock.now), which every report is stamped with
    keeps_orders = True

    def connect(self) -> list[Input]:
        now = self.now()
        return [VenueDisconnected(ts_event=now, ts_init=now, venue=self.name, reason="connecting")]

    def on_market(self, msg: MarketData) -> list[Input]:
        return []  # a real venue matches against its own book, not foxhunt's market data


class Reports:
    """A remote venue's reports on their way to the bus, in the order they arrived.

    `emit` runs in the event loop's callbacks that turn what the venue said into inputs (quickfix's
    deliveries, ib_async's events). While the bus has room and nothing waits ahead, the report goes onto
    it at once: the trading loop sees an acknowledgement without a pump task being woken first. Otherwise
    it waits here, in order, until `pump` has put everything ahead of it on the bus. Nothing is dropped:
    what cannot go at once waits (a venue's reports are few; the bus's bound is there for the feed).
    """

    def __init__(self) -> None:
        self._bus: MemoryObjectSendStream[Input] | None = None
        self._waiting: deque[Input] = deque()
        self._ready = asyncio.Event()

    def emit(self, msg: Input) -> None:
        if self._bus is not None and not self._waiting:
            try:
                self._bus.send_nowait(msg)
                return
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # a full bus waits in `pump`; a closed one raises there, in the venue's task
        self._waiting.append(msg)
        self._ready.set()

    async def pump(self, bus: MemoryObjectSendStream[Input]) -> None:
        """Until cancelled: publish on `bus` what `emit` could not, in order, waiting for room."""
        self._bus = bus
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                while self._waiting:
                    await bus.send(self._waiting[0])
                    self._waiting.popleft()  # only once it is on the bus
        finally:
            self._bus = None
