"""The daemon (`foxhunt run`), for the simulated venue and the real ones alike: sources publish to the
bus, the trading loop consumes it.

Supervision: one task group holds the feed (publishing to the bus), the signal watcher and, around them
all, the journal writer (owned by the journal's context). The consumer runs in the group's host task. An
exception in any task cancels the others and ends the run: crash-only, the journal rebuilds the state on
the next start.

Starting is always a recovery: if the journal already holds events, the kernel is restored from its
newest usable snapshot and the inputs after it are fed through it (all inputs, through a fresh kernel,
when there is none: runtime/recovery.py, recover), so it continues from the state the journal describes.
The simulated venue keeps nothing across processes, so orders the recovered kernel still believes
working are recorded as canceled by the venue, with the reason, before trading starts. A start that fed
many inputs, and a stop after many, save a snapshot ([journal] snapshot_after).

The run ends at the end of the feed, at `max_events` feed inputs, after `duration` seconds, or on
SIGINT/SIGTERM. A stop request interrupts only waiting, never the handling of an input, so an order is
never left journaled but unsent. Every way of ending cancels the working orders first (policy
`[run] on_stop = "cancel"`, as a journaled command) or leaves them (`"leave"`), records a `RunStopped` and
commits everything; a feed that fails (bad input) ends with a FeedGap naming where and why, behind every
input read before it, which are all handled and journaled, and the run stops the same way, then reports it.

Operating it: the admin socket (runtime/console.py) is served from the same task group; its commands
reach the loop through the urgent lane, ahead of queued market data. SIGHUP re-reads the configuration
file: changed risk limits become a `ConfigReloaded` input (applied where it stands, in replay too), other
changes are named as needing a restart. Under systemd, READY=1 goes out once the journal is open, the
state recovered and the venue connected; STATUS= and WATCHDOG=1 come from the consuming loop itself, so
a stuck loop stops them; STOPPING=1 when the stop begins.
"""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import resource
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt import config
from foxhunt.admin import server as admin_server
from foxhunt.admin.protocol import UsageError
from foxhunt.config import Config, TradingConfig, trading_from_json
from foxhunt.core.kernel import Kernel
from foxhunt.errors import ConfigError, InputError
from foxhunt.heap import started_heap_frozen
from foxhunt.messages.base import Derived, Input
from foxhunt.messages.market import MARKET_DATA_TYPES
from foxhunt.messages.orders import OrderCanceled
from foxhunt.messages.scores import ModelScored, PolicyActed
from foxhunt.messages.system import (
    AdminCommand,
    ClockHeld,
    FeedGap,
    JournalDegraded,
    JournalRecovered,
    RunStarted,
    RunStopped,
)
from foxhunt.ports import Clock, JournalStore, Notifier, Venue
from foxhunt.runtime.bus import Bus, BusClosed, publish_all
from foxhunt.runtime.clock import WallClock
from foxhunt.runtime.console import Console
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.reconfigure import journal_config, risk_reload
from foxhunt.runtime.recovery import Recovery, VenueFactory, recover
from foxhunt.runtime.scoring import ModelSource
from foxhunt.runtime.snapshots import save_snapshot
from foxhunt.runtime.summary import summarize

if TYPE_CHECKING:  # imported only where telemetry is turned on (the SDK takes a while to import)
    from foxhunt.observability.telemetry import Telemetry

log = structlog.get_logger("foxhunt.daemon")


@dataclass
class RunRequest:
    journal: str
    feed: Iterable[Input] | None  # None: no feed (the venue brings market data); the run lasts until stopped
    clock: Clock
    max_events: int | None = None
    duration: float | None = None
    feed_rate: float | None = None  # inputs per second (a paced feed), None: as fast as the loop takes them
    startup_signals: StartupSignals | None = None  # a stop asked for before the run's signal watcher took over


class StartupSignals:
    """SIGINT and SIGTERM from the start of `foxhunt run` until the daemon's signal watcher takes them over
    (once the journal is consistent and the run has started): recorded, not the default action (an exit
    with nothing said). The run then starts, logs the request and stops at once, cleanly (`_watch_signals`)."""

    def __init__(self) -> None:
        self.name: str | None = None

    def install(self) -> StartupSignals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, _frame: object) -> None:
        # recorded only: it runs between two bytecodes of whatever the main thread does, say in the middle of
        # writing a log line, whose lock logging here would wait for for ever. `_watch_signals` logs it.
        if self.name is None:
            self.name = signal.Signals(signum).name


@dataclass
class Operations:
    """How the daemon is wired to the world, built by the composition root (bootstrap.operations): the
    venue, its supervisor's notifications, the admin socket (None: none) and telemetry (None: off)."""

    venue: VenueFactory
    notifier: Notifier
    admin: admin_server.ServerPolicy | None = None
    telemetry: Telemetry | None = None
    # the configuration as it reads now (SIGHUP: bootstrap reads the file and the environment again), and
    # where it is read from, for the log; a reload that cannot read it raises ConfigError
    reread_config: Callable[[], Config] | None = None
    config_source: str = "(defaults and environment)"
    # the source of model inputs for the journal's strategy, on the run's clock and reading its kernel: the
    # scoring source (runtime/scoring.py) or the policy source (runtime/policies.py); None where the strategy
    # reads neither
    scoring: Callable[[TradingConfig, Clock, Kernel], ModelSource | None] | None = None


Done = Callable[[int, Sequence[Derived]], None]
YIELD_EVERY_MASK = 255  # the consuming loop yields to the other tasks once every 256 inputs taken in a row
STOP_CANCEL_WAIT = 5.0  # seconds a stop waits for a real venue to confirm the stop policy's cancels


class _Control:
    """What must interrupt the wait for the next input: a request to stop, and urgent inputs (the
    journal's health) that go before everything queued on the bus."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.feed_error: InputError | None = None
        self.urgent: deque[tuple[Input, Done | None]] = deque()
        self.waiting: anyio.CancelScope | None = None
        self.feed_done = False
        self.scoring: ModelSource | None = None  # at the end of the feed, the run waits for its scores

    @property
    def stop_reason(self) -> str:
        """Why the run stops: a request's reason, else how the feed ended."""
        if self.reason is not None:
            return self.reason
        return f"feed error: {self.feed_error}" if self.feed_error is not None else "feed ended"

    def request_stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._wake()

    def feed_ended(self) -> None:
        self.feed_done = True
        self._wake()

    def push_urgent(self, msg: Input, done: Done | None = None) -> None:
        self.urgent.append((msg, done))
        self._wake()

    async def submit_admin(self, cmd: AdminCommand) -> tuple[int, Sequence[Derived]]:
        """Hand an operator's command to the loop; return its sequence number and what it derived, once
        the journal has committed it."""
        if self.reason is not None:
            raise UsageError(f"the daemon is stopping ({self.reason}); command not taken")
        answer: list[tuple[int, Sequence[Derived]]] = []
        handled = anyio.Event()

        def done(seq: int, derived: Sequence[Derived]) -> None:
            answer.append((seq, derived))
            handled.set()

        self.push_urgent(cmd, done)
        await handled.wait()
        return answer[0]

    def _wake(self) -> None:
        if self.waiting is not None:
            self.waiting.cancel()


async def run_daemon(
    store: JournalStore, cfg: Config, req: RunRequest, fingerprint: dict[str, str], ops: Operations
) -> dict:
    # no core dump: it would hold what the process holds, the FIX Logon's password among it (the unit file
    # says LimitCORE=0 too, for a crash before this line)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    trading = cfg.trading()
    control = _Control()
    started = time.perf_counter()
    structlog.contextvars.bind_contextvars(journal=req.journal)
    async with contextlib.AsyncExitStack() as resources:
        resources.callback(ops.notifier.close)
        if ops.telemetry is not None:
            resources.callback(ops.telemetry.shutdown)
        journal = await resources.enter_async_context(
            store.writer(req.journal, config=trading.to_json(), config_digest=trading.digest(), fingerprint=fingerprint)
        )
        # a journal's kernel is always built as its first run built it, so that replay, which can only know
        # that configuration, follows every run; later runs change risk limits through the journal
        built_with = await journal_config(store, req.journal, trading) if journal.last_seq else trading
        recovery = await recover(store, req.journal, built_with, journal.last_seq)
        kernel = recovery.kernel
        unsnapshotted = recovery.inputs  # inputs the kernel took since the snapshot it started from
        if unsnapshotted >= cfg.journal.snapshot_after > 0:  # the next start feeds only the inputs after it
            await save_snapshot(store, req.journal, kernel, journal.last_seq, recovery.total_inputs, built_with)
            unsnapshotted = 0
        venue = ops.venue(kernel, built_with, req.clock)
        if isinstance(venue, contextlib.AbstractContextManager):  # one that holds a file (ports.Venue)
            resources.enter_context(venue)
        loop = TradingLoop(kernel, venue, journal, cfg.journal.durability)
        # from the first write on (the run's start): an outage then halts trading before it starts
        journal.watch_health(lambda reason, outage: control.push_urgent(_health_input(req.clock, reason, outage)))
        if isinstance(req.clock, WallClock):  # a step back of the system clock, journaled once
            req.clock.on_step_back = lambda step, held: control.push_urgent(
                ClockHeld(ts_event=held, ts_init=held, step_ns=step))
        scoring = ops.scoring(built_with, req.clock, kernel) if ops.scoring is not None else None
        console = Console(loop, store, req.journal, cfg, req.clock, control.submit_admin, venue.name, scoring)
        loop.on_wait = lambda: _heartbeat(console, ops.notifier)
        if ops.telemetry is not None:
            loop.observer = ops.telemetry
            journal.watch_commits(ops.telemetry.on_commit)
        await _start(loop, trading, req, fingerprint, recovery)
        if scoring is not None:  # its windows start with the run, once its models are loaded (or have failed)
            for event in await scoring.start():
                await loop.submit(event)
            loop.on_market = scoring.observe
            control.scoring = scoring
        with started_heap_frozen():  # the start-up's heap out of the collector's full passes
            await _trade(loop, req, control, console, ops, cfg.run.on_stop)
    reason = control.stop_reason
    log.info("run_stopped", journal=req.journal, reason=reason, last_seq=journal.last_seq)
    # everything is committed now: a stop on purpose leaves a snapshot, so the next start feeds nothing
    if unsnapshotted + loop.inputs >= cfg.journal.snapshot_after > 0:
        await save_snapshot(store, req.journal, kernel, journal.last_seq, recovery.total_inputs + loop.inputs,
                            built_with)
    if control.feed_error is not None:
        raise control.feed_error
    return summarize(
        kernel, events=loop.inputs + loop.derived, seconds=time.perf_counter() - started, journal=req.journal,
        mode="run", inputs=loop.inputs, last_seq=journal.last_seq, stopped=reason,
    )


async def _start(
    loop: TradingLoop, trading: TradingConfig, req: RunRequest, fingerprint: dict[str, str], recovery: Recovery
) -> None:
    """Mark the run's start after the recovery, connect the venue and reconcile with it."""
    kernel, journal, clock = loop.kernel, loop.journal, req.clock
    recovered, last_run = recovery.inputs, kernel.run
    if journal.last_seq:
        log.info("recovered", journal=req.journal, inputs=recovered, last_seq=journal.last_seq,
                 from_snapshot=recovery.snapshot.seq if recovery.snapshot else None,
                 snapshots_skipped=recovery.skipped or None, state_digest=kernel.state_digest())
    now = clock.now()
    await loop.submit(
        RunStarted(
            ts_event=now, ts_init=now, run_id=journal.last_seq + 1, seed=trading.seed,
            config_digest=trading.digest(), config=trading.to_json(), fingerprint=fingerprint, clock=clock.name,
        )
    )
    if last_run is not None:  # risk limits edited in the file since the last run take effect now, journaled
        previous = trading_from_json(last_run.config).risk
        reload = risk_reload(kernel, previous, trading.risk, "configuration at start-up", now)
        if reload is not None:
            await loop.submit(reload)
    for msg in loop.venue.connect():
        await loop.submit(msg)
    if loop.venue.keeps_orders:  # a real venue: its working orders are reconciled once it has logged on
        log.info("run_started", journal=req.journal, first_seq=journal.last_seq, recovered_inputs=recovered)
        return
    for order in list(kernel.orders.open.values()):
        await loop.submit(
            OrderCanceled(
                ts_event=now, ts_init=now, order_id=order.order_id, symbol=order.symbol,
                reason="paper venue restarted: its working orders did not survive",
            )
        )
    log.info("run_started", journal=req.journal, first_seq=journal.last_seq, recovered_inputs=recovered)


async def _trade(
    loop: TradingLoop, req: RunRequest, control: _Control, console: Console, ops: Operations, on_stop: str
) -> None:
    """The sources, the venue, the signal watcher and the admin socket as tasks; the loop consuming the bus
    here, then stopping while the venue still runs (so the stop policy's cancels reach it)."""
    with Bus() as bus:
        async with anyio.create_task_group() as tg:
            await tg.start(_run_venue, loop.venue, bus.publisher())
            if ops.admin is not None:
                await tg.start(admin_server.serve, ops.admin, console)
            tg.start_soon(_watch_signals, control, req, console, ops)
            tg.start_soon(_run_feed, req.feed, bus.publisher(), control, req.feed_rate)
            if control.scoring is not None:
                tg.start_soon(control.scoring.run, bus.publisher())
            bus.seal()  # every source has its publisher: the bus ends when they all have
            ops.notifier.ready(console.summary_line())
            log.info("ready", journal=req.journal, admin_socket=str(ops.admin.path) if ops.admin else None)
            await _consume(loop, bus, req, control, console, ops.notifier)
            ops.notifier.stopping(f"stopping: {control.stop_reason}")
            await _finish(loop, bus, req.clock, control, on_stop)
            tg.cancel_scope.cancel()


async def _finish(loop: TradingLoop, bus: Bus, clock: Clock, control: _Control, on_stop: str) -> None:
    loop.on_market = None  # nothing is scored any more: no new exposure while the run stops
    while control.urgent:  # the journal's last word on its health still goes into it
        await _submit_urgent(loop, clock, control)
    now = clock.now()
    if on_stop == "cancel" and loop.kernel.orders.open:
        await loop.submit(
            AdminCommand(ts_event=now, ts_init=now, command="cancel", args=["all"], operator_uid=os.geteuid(),
                         operator=_user(), reason=f"stop policy on_stop=cancel: {control.stop_reason}")
        )
        if loop.venue.keeps_orders:
            await _await_cancels(loop, bus, clock)
    now = clock.now()
    await loop.submit(RunStopped(ts_event=now, ts_init=now, reason=control.stop_reason))
    await loop.journal.flush()


async def _await_cancels(loop: TradingLoop, bus: Bus, clock: Clock) -> None:
    """A real venue answers later: record its reports until no order is working, for at most
    STOP_CANCEL_WAIT seconds. Market data, scores and agents' decisions still queued are not traded on any
    more and are left out."""
    deadline = time.monotonic() + STOP_CANCEL_WAIT
    while loop.kernel.orders.open and time.monotonic() < deadline:
        try:
            msg = bus.take_nowait() or await bus.take(timeout=deadline - time.monotonic())
        except BusClosed:
            return
        if msg is not None and type(msg) not in MARKET_DATA_TYPES and type(msg) not in (ModelScored, PolicyActed):
            clock.advance(msg.ts_init)
            await loop.submit(msg)
    if loop.kernel.orders.open:
        log.warning("stop_with_working_orders", orders=sorted(loop.kernel.orders.open),
                    why=f"the venue did not confirm the cancels within {STOP_CANCEL_WAIT} s")


async def _consume(
    loop: TradingLoop, bus: Bus, req: RunRequest, control: _Control, console: Console, notifier: Notifier
) -> None:
    clock = req.clock
    deadline = time.monotonic() + req.duration if req.duration is not None else math.inf
    count = 0
    while control.reason is None:
        if control.urgent:
            await _submit_urgent(loop, clock, control)
            continue
        try:
            msg = bus.take_nowait()
            if msg is None and control.feed_done and not (control.scoring is not None and control.scoring.busy):
                return  # the feed has ended and everything it sent is handled, scores of it included
            if msg is None:
                _heartbeat(console, notifier)
                wait = min(deadline - time.monotonic(), notifier.seconds_to_heartbeat(), 1.0)
                with anyio.CancelScope() as control.waiting:
                    msg = await bus.take(timeout=wait)
                control.waiting = None
        except BusClosed:
            return
        if msg is None:  # woken by a stop request or an urgent input, a heartbeat is due, or the time is up
            if time.monotonic() >= deadline:
                control.request_stop("duration")
            continue
        clock.advance(msg.ts_init)
        rest = loop.take_nowait(msg)
        if rest is not None:
            await rest
        count += 1
        if req.max_events is not None and count >= req.max_events:
            control.request_stop("max-events")
        elif count & YIELD_EVERY_MASK == 0:
            # the loop takes queued inputs without yielding; in a burst, the other tasks (the scoring
            # source's answers, the admin socket, a venue) get a turn at least this often
            await anyio.lowlevel.checkpoint()
            if count & 1023 == 0:
                _heartbeat(console, notifier)
                if time.monotonic() >= deadline:
                    control.request_stop("duration")


async def _submit_urgent(loop: TradingLoop, clock: Clock, control: _Control) -> None:
    msg, done = control.urgent.popleft()
    clock.advance(msg.ts_init)
    seq, derived = await loop.submit(msg)
    if done is not None:
        await loop.journal.flush()  # whoever asked hears back once the input is durable
        done(seq, derived)


def _heartbeat(console: Console, notifier: Notifier) -> None:
    now = time.monotonic()
    console.rates.sample(console.loop.inputs, console.loop.derived, now)
    if notifier.heartbeat_due(now):
        notifier.heartbeat(console.summary_line())


def _health_input(clock: Clock, reason: str | None, outage_ns: int) -> Input:
    now = clock.now()
    if reason is not None:
        return JournalDegraded(ts_event=now, ts_init=now, reason=reason)
    return JournalRecovered(ts_event=now, ts_init=now, outage_ns=outage_ns)


async def _run_feed(
    feed: Iterable[Input] | None, publisher: MemoryObjectSendStream[Input], control: _Control, rate: float | None
) -> None:
    if feed is None:
        with publisher:
            await anyio.sleep_forever()
    await publish_all(_until_error(feed, control), publisher, rate)
    control.feed_ended()


def _until_error(feed: Iterable[Input], control: _Control) -> Iterator[Input]:
    """The feed's inputs, up to one it cannot read: that error ends the feed as its last input, a FeedGap
    naming where and why, behind everything read before it, which the run handles and journals before it
    stops (the run then stops as for the end of the feed, with the error as its reason)."""
    ts = 0
    try:
        for msg in feed:
            ts = msg.ts_init
            yield msg
    except InputError as e:
        control.feed_error = e
        yield FeedGap(ts_event=ts, ts_init=ts, source="feed", reason=f"the feed stopped: {e}")


async def _run_venue(
    venue: Venue, publisher: MemoryObjectSendStream[Input], *, task_status: anyio.abc.TaskStatus
) -> None:
    """A real venue's reports, published as they arrive (a simulated venue returns at once). They do not
    keep the run alive: it ends with the feed, once what the feed sent is handled."""
    with publisher:
        await venue.run(publisher, task_status=task_status)


async def _watch_signals(control: _Control, req: RunRequest, console: Console, ops: Operations) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        # from here on the signals come here; one that came before, during start-up, is honoured now
        if req.startup_signals is not None and req.startup_signals.name is not None:
            log.info("stop_requested", signal=req.startup_signals.name, during="start-up")
            control.request_stop(f"signal {req.startup_signals.name} during start-up")
        async for signum in signals:
            name = signal.Signals(signum).name
            if signum == signal.SIGHUP:
                _reload(control, req, console, ops)
                continue
            log.info("stop_requested", signal=name)
            control.request_stop(f"signal {name}")


def _reload(control: _Control, req: RunRequest, console: Console, ops: Operations) -> None:
    """SIGHUP: the configuration read again (by the composition root's `reread_config`); risk limits change
    through the journal, the rest needs a restart. A file that does not load changes nothing and says why."""
    source = ops.config_source
    if ops.reread_config is None:
        log.warning("config_reload_unavailable", source=source)
        return
    try:
        new = ops.reread_config()
        _, restart = config.changes(console.cfg, new)
        reload = risk_reload(console.loop.kernel, console.cfg.risk, new.risk, source, req.clock.now(), restart)
    except ConfigError as e:
        log.error("config_reload_failed", source=source, error=str(e))
        return
    if restart:
        log.warning("config_needs_restart", source=source, keys=restart)
    if reload is None:
        log.info("config_unchanged", source=source)
        return
    console.cfg = msgspec.structs.replace(console.cfg, risk=new.risk)
    control.push_urgent(
        reload, lambda seq, _: log.info("config_reloaded", source=source, seq=seq, changed=reload.changed,
                                        needs_restart=restart)
    )


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
