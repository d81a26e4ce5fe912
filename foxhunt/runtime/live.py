"""The paper-trading daemon: a feed through the trading loop into the journal and the simulated venue.

Starting is always a recovery: if the journal already holds events, their inputs are fed through the
kernel first, so it continues from the state the journal describes. The simulated venue keeps nothing
across processes, so orders the recovered kernel still believes working are recorded as canceled by the
venue, with the reason, before trading starts. The run ends at the end of the feed, at `max_events`
inputs, after `duration` seconds, or on SIGINT/SIGTERM; every way of ending records a `RunStopped` and
leaves everything committed.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import structlog

from foxhunt.adapters.venue_sim import SimVenue
from foxhunt.config import Config
from foxhunt.errors import InputError
from foxhunt.messages.base import Input
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.orders import OrderCanceled
from foxhunt.messages.system import RunStarted, RunStopped
from foxhunt.ports import Clock, JournalStore
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel, recover
from foxhunt.runtime.summary import summarize

log = structlog.get_logger("foxhunt.live")
MARKET_DATA = (QuoteTick, TradeTick, Bar)
_YIELD_EVERY = 1024  # inputs between checkpoints, so signals and the journal writer get their turn


@dataclass
class RunRequest:
    journal: str
    feed: Iterable[Input]
    clock: Clock
    max_events: int | None = None
    duration: float | None = None


async def run_paper(store: JournalStore, cfg: Config, req: RunRequest, fingerprint: dict[str, str]) -> dict:
    trading = cfg.trading()
    config_json = trading.to_json()
    kernel = build_kernel(trading)
    clock = req.clock
    venue = SimVenue(kernel.instruments, trading.venue, clock)
    started = time.perf_counter()
    feed_error: InputError | None = None
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
        reason = "feed ended"
        async with anyio.create_task_group() as tg:
            stop = anyio.Event()
            signal_names: list[str] = []
            tg.start_soon(_watch_signals, stop, signal_names)
            try:
                reason = await _pump(loop, req, stop, signal_names) or reason
            except InputError as e:
                feed_error, reason = e, f"feed error: {e}"
            tg.cancel_scope.cancel()
        now = clock.now()
        await loop.submit(RunStopped(ts_event=now, ts_init=now, reason=reason))
        await journal.flush()
        last_seq = journal.last_seq
    log.info("run_stopped", journal=req.journal, reason=reason, last_seq=last_seq)
    if feed_error is not None:
        raise feed_error
    return summarize(
        kernel, events=loop.inputs + loop.derived, seconds=time.perf_counter() - started, journal=req.journal,
        mode="run", inputs=loop.inputs, last_seq=last_seq, stopped=reason,
    )


async def _pump(loop: TradingLoop, req: RunRequest, stop: anyio.Event, signal_names: list[str]) -> str | None:
    deadline = time.monotonic() + req.duration if req.duration is not None else None
    count = 0
    for msg in req.feed:
        if isinstance(msg, MARKET_DATA):
            await loop.market(msg)
        else:
            await loop.submit(msg)
        count += 1
        if count % _YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        if stop.is_set():
            return f"signal {signal_names[0]}"
        if req.max_events is not None and count >= req.max_events:
            return "max-events"
        if deadline is not None and time.monotonic() >= deadline:
            return "duration"
    return None


async def _watch_signals(stop: anyio.Event, names: list[str]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            names.append(signal.Signals(signum).name)
            log.info("stop_requested", signal=names[-1])
            stop.set()
