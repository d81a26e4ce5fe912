"""The paper-trading daemon: sources publish to the bus, the trading loop consumes it.

Supervision: one task group holds the feed (publishing to the bus), the signal watcher and, around them
all, the journal writer (owned by the journal's context). The consumer runs in the group's host task. An
exception in any task cancels the others and ends the run: crash-only, the journal rebuilds the state on
the next start.

Starting is always a recovery: if the journal already holds events, their inputs are fed through the
kernel first, so it continues from the state the journal describes. The simulated venue keeps nothing
across processes, so orders the recovered kernel still believes working are recorded as canceled by the
venue, with the reason, before trading starts.

The run ends at the end of the feed, at `max_events` feed inputs, after `duration` seconds, or on
SIGINT/SIGTERM. A stop request interrupts only waiting, never the handling of an input, so an order is
never left journaled but unsent. Every way of ending records a `RunStopped` and commits everything; a
feed that fails (bad input) is recorded the same way, then reported.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.adapters.venue_sim import SimVenue
from foxhunt.config import Config
from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.orders import OrderCanceled
from foxhunt.messages.system import RunStarted, RunStopped
from foxhunt.ports import Clock, JournalStore
from foxhunt.runtime.bus import Bus, BusClosed, publish_all
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel, recover
from foxhunt.runtime.summary import summarize

log = structlog.get_logger("foxhunt.live")
MARKET_DATA = (QuoteTick, TradeTick, Bar)


@dataclass
class RunRequest:
    journal: str
    feed: Iterable[Input]
    clock: Clock
    max_events: int | None = None
    duration: float | None = None


class _Stop:
    """Why the run should end, and the cancel scope of the wait it must interrupt."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.feed_error: InputError | None = None
        self.waiting: anyio.CancelScope | None = None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        if self.waiting is not None:
            self.waiting.cancel()


async def run_paper(store: JournalStore, cfg: Config, req: RunRequest, fingerprint: dict[str, str]) -> dict:
    trading = cfg.trading()
    config_json = trading.to_json()
    kernel = build_kernel(trading)
    clock = req.clock
    venue = SimVenue(kernel.instruments, trading.venue, clock)
    started = time.perf_counter()
    stop = _Stop()
    async with store.writer(
        req.journal, config=config_json, config_digest=trading.digest(), fingerprint=fingerprint
    ) as journal:
        recovered = await recover(store, req.journal, kernel, journal.last_seq) if journal.last_seq else 0
        loop = TradingLoop(kernel, venue, journal, cfg.journal.durability)
        now = clock.now()
        await loop.submit(
            RunStarted(
                ts_event=now, ts_init=now, run_id=journal.last_seq + 1, seed=trading.seed,
                config_digest=trading.digest(), config=config_json, fingerprint=fingerprint, clock=clock.name,
            )
        )
        for msg in venue.connect():
            await loop.submit(msg)
        for order in list(kernel.orders.open.values()):
            await loop.submit(
                OrderCanceled(
                    ts_event=now, ts_init=now, order_id=order.order_id, symbol=order.symbol,
                    reason="paper venue restarted: its working orders did not survive",
                )
            )
        log.info("run_started", journal=req.journal, first_seq=journal.last_seq, recovered_inputs=recovered)
        bus = Bus()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_run_feed, req.feed, bus.publisher(), stop)
            tg.start_soon(_watch_signals, stop)
            bus.seal()  # every source has its publisher: the bus ends when they all have
            await _consume(loop, bus, clock, req, stop)
            tg.cancel_scope.cancel()
        reason = stop.reason or "feed ended"
        now = clock.now()
        await loop.submit(RunStopped(ts_event=now, ts_init=now, reason=reason))
        await journal.flush()
        last_seq = journal.last_seq
    log.info("run_stopped", journal=req.journal, reason=reason, last_seq=last_seq)
    if stop.feed_error is not None:
        raise stop.feed_error
    return summarize(
        kernel, events=loop.inputs + loop.derived, seconds=time.perf_counter() - started, journal=req.journal,
        mode="run", inputs=loop.inputs, last_seq=last_seq, stopped=reason,
    )


async def _consume(loop: TradingLoop, bus: Bus, clock: Clock, req: RunRequest, stop: _Stop) -> None:
    deadline = time.monotonic() + req.duration if req.duration is not None else math.inf
    count = 0
    while stop.reason is None:
        try:
            msg = bus.take_nowait()
            if msg is None:
                with anyio.CancelScope() as stop.waiting:
                    msg = await bus.take(timeout=deadline - time.monotonic())
                stop.waiting = None
        except BusClosed:
            return
        if msg is None:  # woken by a stop request, or the duration ran out while waiting
            if time.monotonic() >= deadline:
                stop.request("duration")
            continue
        clock.advance(msg.ts_init)
        if isinstance(msg, MARKET_DATA):
            await loop.market(msg)
        else:
            await loop.submit(msg)
        count += 1
        if req.max_events is not None and count >= req.max_events:
            stop.request("max-events")
        elif count & 1023 == 0 and time.monotonic() >= deadline:
            stop.request("duration")


async def _run_feed(feed: Iterable[Input], publisher: MemoryObjectSendStream[Input], stop: _Stop) -> None:
    try:
        await publish_all(feed, publisher)
    except InputError as e:
        stop.feed_error = e
        stop.request(f"feed error: {e}")


async def _watch_signals(stop: _Stop) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            log.info("stop_requested", signal=name)
            stop.request(f"signal {name}")
