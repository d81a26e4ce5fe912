"""The in-memory event bus: every source of inputs publishes here, and the trading loop is its only
consumer, so inputs reach the kernel one at a time, in the order they arrived.

The bus is bounded: when the loop (or the journal behind it) falls behind, publishers wait instead of
memory growing. Each source gets its own sender; the bus ends once every sender is closed. Receiving
drains what is already queued without yielding to the event loop, and waits only when the bus is empty.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.messages.base import Input

DEFAULT_CAPACITY = 10_000


class BusClosed(Exception):
    """Every publisher has closed its sender and the bus is drained."""


class Bus:
    """Used as a context manager: its own ends are closed when the run is done with it (a publisher closes
    its own sender)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[Input](capacity)

    def __enter__(self) -> Bus:
        return self

    def __exit__(self, *exc: object) -> None:
        self._send.close()
        self._receive.close()

    def publisher(self) -> MemoryObjectSendStream[Input]:
        """A sender for one source; close it (or use it as a context manager) when the source ends."""
        return self._send.clone()

    def seal(self) -> None:
        """Close the bus's own sender: from now on the bus ends when the last publisher closes."""
        self._send.close()

    def take_nowait(self) -> Input | None:
        """The next input if one is queued, else None; raises BusClosed when the bus has ended."""
        try:
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            return None
        except anyio.EndOfStream:
            raise BusClosed from None

    async def take(self, timeout: float = math.inf) -> Input | None:
        """The next input, waiting up to `timeout` seconds (None when it passes)."""
        with anyio.move_on_after(timeout):
            try:
                return await self._receive.receive()
            except anyio.EndOfStream:
                raise BusClosed from None
        return None


async def publish_all(
    source: Iterable[Input], publisher: MemoryObjectSendStream[Input], rate: float | None = None
) -> None:
    """Publish everything a synchronous source yields (a feed), then close the publisher.

    Sends without yielding while the bus has room and waits when it is full, so a fast recorded feed costs
    no scheduling per input and a slow loop holds it back. With `rate`, inputs go out at that many per
    second on the monotonic clock (a live-like paced feed), catching up after a slow stretch.
    """
    start = time.monotonic()
    with publisher:
        inputs = iter(source)
        i = 0
        while True:
            if rate is not None:  # wait before taking the next input, so it is made (and stamped) when due
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await anyio.sleep(delay)
                i += 1
            msg = next(inputs, None)
            if msg is None:
                return
            try:
                publisher.send_nowait(msg)
            except anyio.WouldBlock:
                await publisher.send(msg)
