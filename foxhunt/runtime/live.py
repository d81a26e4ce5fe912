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

import contextlib
import math
import signal
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.adapters.venue_sim import SimVenue
from foxhunt.adapters.venue_wire_log import WireLoggedVenue
from foxhunt.config import Config, TradingConfig
from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.orders import OrderCanceled
from foxhunt.messages.system import JournalDegraded, JournalRecovered, RunStarted, RunStopped
from foxhunt.ports import Clock, JournalStore, Venue
from foxhunt.runtime.bus import Bus, BusClosed, publish_all
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel, recover, refuse_if_ingested
from foxhunt.runtime.summary import summarize

log = structlog.get_logger("foxhunt.live")


@dataclass
class RunRequest:
    journal: str
    feed: Iterable[Input]
    clock: Clock
    max_events: int | None = None
    duration: float | None = None


class _Control:
    """What must interrupt the wait for the next input: a request to stop, and urgent inputs (the
    journal's health) that go before everything queued on the bus."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.feed_error: InputError | None = None
        self.urgent: deque[Input] = deque()
        self.waiting: anyio.CancelScope | None = None

    def request_stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._wake()

    def push_urgent(self, msg: Input) -> None:
        self.urgent.append(msg)
        self._wake()

    def _wake(self) -> None:
        if self.waiting is not None:
            self.waiting.cancel()


async def run_paper(store: JournalStore, cfg: Config, req: RunRequest, fingerprint: dict[str, str]) -> dict:
    trading = cfg.trading()
    kernel = build_kernel(trading)
    venue: Venue = SimVenue(kernel.instruments, trading.venue, req.clock)
    control = _Control()
    started = time.perf_counter()
    async with contextlib.AsyncExitStack() as resources:
        if cfg.run.wire_log:
            venue = resources.enter_context(WireLoggedVenue(venue, Path(cfg.run.wire_log)))
        journal = await resources.enter_async_context(
            store.writer(req.journal, config=trading.to_json(), config_digest=trading.digest(), fingerprint=fingerprint)
        )
        loop = TradingLoop(kernel, venue, journal, cfg.journal.durability)
        # from the first write on: an outage during recovery halts trading before it starts
        journal.watch_health(lambda reason, outage: control.push_urgent(_health_input(req.clock, reason, outage)))
        await _start(store, loop, trading, req, fingerprint)
        await _trade(loop, req, control)
        await _finish(loop, req.clock, control)
    reason = control.reason or "feed ended"
    log.info("run_stopped", journal=req.journal, reason=reason, last_seq=journal.last_seq)
    if control.feed_error is not None:
        raise control.feed_error
    return summarize(
        kernel, events=loop.inputs + loop.derived, seconds=time.perf_counter() - started, journal=req.journal,
        mode="run", inputs=loop.inputs, last_seq=journal.last_seq, stopped=reason,
    )


async def _start(
    store: JournalStore, loop: TradingLoop, trading: TradingConfig, req: RunRequest, fingerprint: dict[str, str]
) -> None:
    """Recover from the journal, mark the run's start, connect the venue and reconcile with it."""
    kernel, journal, clock = loop.kernel, loop.journal, req.clock
    if journal.last_seq:
        await refuse_if_ingested(store, req.journal, "trade on")
    recovered = await recover(store, req.journal, kernel, journal.last_seq) if journal.last_seq else 0
    if recovered:
        log.info("recovered", journal=req.journal, inputs=recovered, last_seq=journal.last_seq,
                 state_digest=kernel.state_digest())
    now = clock.now()
    await loop.submit(
        RunStarted(
            ts_event=now, ts_init=now, run_id=journal.last_seq + 1, seed=trading.seed,
            config_digest=trading.digest(), config=trading.to_json(), fingerprint=fingerprint, clock=clock.name,
        )
    )
    for msg in loop.venue.connect():
        await loop.submit(msg)
    for order in list(kernel.orders.open.values()):
        await loop.submit(
            OrderCanceled(
                ts_event=now, ts_init=now, order_id=order.order_id, symbol=order.symbol,
                reason="paper venue restarted: its working orders did not survive",
            )
        )
    log.info("run_started", journal=req.journal, first_seq=journal.last_seq, recovered_inputs=recovered)


async def _trade(loop: TradingLoop, req: RunRequest, control: _Control) -> None:
    """The sources and the signal watcher as tasks publishing to the bus; the loop consuming it here."""
    bus = Bus()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run_feed, req.feed, bus.publisher(), control)
        tg.start_soon(_watch_signals, control)
        bus.seal()  # every source has its publisher: the bus ends when they all have
        await _consume(loop, bus, req.clock, req, control)
        tg.cancel_scope.cancel()


async def _finish(loop: TradingLoop, clock: Clock, control: _Control) -> None:
    while control.urgent:  # the journal's last word on its health still goes into it
        await loop.submit(control.urgent.popleft())
    now = clock.now()
    await loop.submit(RunStopped(ts_event=now, ts_init=now, reason=control.reason or "feed ended"))
    await loop.journal.flush()


async def _consume(loop: TradingLoop, bus: Bus, clock: Clock, req: RunRequest, control: _Control) -> None:
    deadline = time.monotonic() + req.duration if req.duration is not None else math.inf
    count = 0
    while control.reason is None:
        if control.urgent:
            msg = control.urgent.popleft()
            clock.advance(msg.ts_init)
            await loop.submit(msg)
            continue
        try:
            msg = bus.take_nowait()
            if msg is None:
                with anyio.CancelScope() as control.waiting:
                    msg = await bus.take(timeout=deadline - time.monotonic())
                control.waiting = None
        except BusClosed:
            return
        if msg is None:  # woken by a stop request or an urgent input, or the duration ran out
            if time.monotonic() >= deadline:
                control.request_stop("duration")
            continue
        clock.advance(msg.ts_init)
        await loop.take(msg)
        count += 1
        if req.max_events is not None and count >= req.max_events:
            control.request_stop("max-events")
        elif count & 1023 == 0 and time.monotonic() >= deadline:
            control.request_stop("duration")


def _health_input(clock: Clock, reason: str | None, outage_ns: int) -> Input:
    now = clock.now()
    if reason is not None:
        return JournalDegraded(ts_event=now, ts_init=now, reason=reason)
    return JournalRecovered(ts_event=now, ts_init=now, outage_ns=outage_ns)


async def _run_feed(feed: Iterable[Input], publisher: MemoryObjectSendStream[Input], control: _Control) -> None:
    try:
        await publish_all(feed, publisher)
    except InputError as e:
        control.feed_error = e
        control.request_stop(f"feed error: {e}")


async def _watch_signals(control: _Control) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            log.info("stop_requested", signal=name)
            control.request_stop(f"signal {name}")
