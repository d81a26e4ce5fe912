"""The runtime on the in-memory journal: the bus, the paper daemon's stop paths, verify and backtest."""

from __future__ import annotations

import gc
from contextlib import aclosing

import anyio
import pytest

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.bootstrap import paper_operations
from foxhunt.core.kernel import BEHAVIOUR
from foxhunt.errors import ConfigError, InputError, VerificationFailed
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.system import RunStarted, RunStopped
from foxhunt.runtime import replay
from foxhunt.runtime.bus import Bus, BusClosed, publish_all
from foxhunt.runtime.clock import EventClock, WallClock
from foxhunt.runtime.daemon import RunRequest, run_daemon
from foxhunt.runtime.recovery import trading_config
from tests.fakes import quote

CFG = config.load(None, env={})
FINGERPRINT = {"test": "1"}


def synthetic(n: int, clock, seed: int = 5):
    return SyntheticFeed(seed, n, CFG.trading().build_instruments()["EURUSD"], parse_fixed("1.1"), clock)


async def messages(store, name) -> list:
    async with aclosing(store.read(name)) as pages:
        return [r.message async for page in pages for r in page]


async def test_bus_delivers_in_order_and_ends_when_every_publisher_has_closed():
    got = []
    with Bus(capacity=3) as bus:
        a, b = bus.publisher(), bus.publisher()
        bus.seal()
        async with anyio.create_task_group() as tg:
            tg.start_soon(publish_all, [quote(i, "1.1", "1.2") for i in range(10)], a)
            b.close()
            while True:
                try:
                    msg = bus.take_nowait() or await bus.take()
                except BusClosed:
                    break
                got.append(msg.ts_event)
    assert got == list(range(10))


async def test_bus_take_times_out_with_none():
    with Bus() as bus, anyio.fail_after(2):
        assert await bus.take(timeout=0.05) is None


async def test_a_paper_run_on_the_memory_journal_verifies_and_backtests_the_same():
    store = MemoryJournalStore()
    clock = EventClock()
    summary = await run_daemon(store, CFG, RunRequest("j", synthetic(4000, clock), clock),
                               FINGERPRINT, paper_operations())
    recorded = await messages(store, "j")
    assert isinstance(recorded[0], RunStarted) and isinstance(recorded[-1], RunStopped)
    assert summary["stopped"] == "feed ended" and summary["orders"] > 10
    trading = await trading_config(store, "j", None, None)
    verified = await replay.verify(store, "j", trading)
    backtest = await bootstrap.backtest(store, "j", trading)
    for key in ("orders", "fills", "pnl", "max_drawdown"):
        assert verified[key] == backtest[key] == summary[key], key
    changed = await trading_config(store, "j", ["strategy.ema_cross.fast=4"], None)
    with pytest.raises(VerificationFailed, match="diverged"):
        await replay.verify(store, "j", changed)


async def test_a_divergence_on_a_journal_an_earlier_kernel_recorded_says_so():
    store = MemoryJournalStore()
    for name, fingerprint in (("old", FINGERPRINT), ("now", {**FINGERPRINT, "kernel": str(BEHAVIOUR)})):
        clock = EventClock()
        await run_daemon(store, CFG, RunRequest(name, synthetic(2000, clock), clock), fingerprint, paper_operations())
    changed = await trading_config(store, "old", ["strategy.ema_cross.fast=4"], None)
    with pytest.raises(VerificationFailed, match="diverged") as old:
        await replay.verify(store, "old", changed)
    assert f"recorded by kernel behaviour 1; this foxhunt's kernel is behaviour {BEHAVIOUR}" in str(old.value)
    with pytest.raises(VerificationFailed, match="diverged") as now:
        await replay.verify(store, "now", changed)
    assert "kernel behaviour" not in str(now.value)  # the same kernel: the configuration is what differs


async def test_duration_stops_a_run_that_would_go_on():
    store = MemoryJournalStore()
    clock = WallClock()
    with anyio.fail_after(20):
        summary = await run_daemon(store, CFG, RunRequest("j", synthetic(10**9, clock), clock, duration=0.3),
                                   FINGERPRINT, paper_operations())
    assert summary["stopped"] == "duration"
    last = (await messages(store, "j"))[-1]
    assert isinstance(last, RunStopped) and last.reason == "duration"


async def test_max_events_counts_feed_inputs():
    store = MemoryJournalStore()
    clock = EventClock()
    summary = await run_daemon(store, CFG, RunRequest("j", synthetic(5000, clock), clock, max_events=700),
                               FINGERPRINT, paper_operations())
    assert summary["stopped"] == "max-events"
    quotes = [m for m in await messages(store, "j") if type(m).__name__ == "QuoteTick"]
    assert len(quotes) == 700


async def test_while_it_trades_what_the_start_made_is_out_of_the_collector_s_full_passes():
    """gc.freeze from the first input traded to the last (a full pass over the start-up's objects, torch's
    among them, stopped the event loop for 140 to 240 ms: bench/gc_pauses.py), and gc.unfreeze after."""
    clock = EventClock()
    frozen_while_trading = []

    def feed():
        for i, q in enumerate(synthetic(300, clock)):
            if i in (0, 299):
                frozen_while_trading.append(gc.get_freeze_count())
            yield q

    before = gc.get_freeze_count()
    summary = await run_daemon(MemoryJournalStore(), CFG, RunRequest("j", feed(), clock), FINGERPRINT,
                               paper_operations())
    assert summary["stopped"] == "feed ended" and len(frozen_while_trading) == 2
    assert all(n > before for n in frozen_while_trading) and gc.get_freeze_count() == before


@pytest.mark.faults
async def test_a_failing_feed_is_recorded_as_the_reason_and_then_reported():
    def broken():
        yield from synthetic(50, EventClock())
        raise InputError("data.csv:52: bid: not a decimal number: 'nan'")

    store = MemoryJournalStore()
    with pytest.raises(InputError, match="data.csv:52"):
        await run_daemon(store, CFG, RunRequest("j", broken(), EventClock()), FINGERPRINT, paper_operations())
    last = (await messages(store, "j"))[-1]
    assert isinstance(last, RunStopped) and last.reason.startswith("feed error: data.csv:52")


async def test_venue_reports_are_stamped_with_the_time_of_the_input_being_handled():
    store = MemoryJournalStore()
    clock = EventClock()
    await run_daemon(store, CFG, RunRequest("j", synthetic(3000, clock), clock), FINGERPRINT, paper_operations())
    latest = 0
    for msg in await messages(store, "j"):
        if type(msg).__name__ in ("OrderAccepted", "OrderFilled", "OrderPartiallyFilled", "OrderCanceled"):
            assert msg.ts_init == latest  # the quote that triggered it, not a later one the feed had queued
        elif type(msg).__name__ == "QuoteTick":
            latest = msg.ts_init


async def test_a_restart_applies_risk_limits_edited_since_through_the_journal_and_still_verifies():
    store = MemoryJournalStore()
    clock = EventClock()
    await run_daemon(store, CFG, RunRequest("j", synthetic(2000, clock), clock), FINGERPRINT, paper_operations())
    edited = config.load(None, env={"FOXHUNT_RISK__COLLAR_BPS": "250"})
    clock = EventClock()
    await run_daemon(store, edited, RunRequest("j", synthetic(2000, clock, seed=6), clock),
                     FINGERPRINT, paper_operations())
    recorded = await messages(store, "j")
    (reload,) = [m for m in recorded if type(m).__name__ == "ConfigReloaded"]
    assert reload.changed == ["collar_bps"] and reload.source == "configuration at start-up"
    changed = next(m for m in recorded if type(m).__name__ == "RiskLimitChanged")
    assert (changed.previous, changed.value) == ("500", "250")
    trading = await trading_config(store, "j", None, None)
    await replay.verify(store, "j", trading)  # raises at the first divergence


async def test_a_restart_with_another_strategy_is_refused_naming_the_settings():
    store = MemoryJournalStore()
    clock = EventClock()
    await run_daemon(store, CFG, RunRequest("j", synthetic(100, clock), clock), FINGERPRINT, paper_operations())
    other = config.load(None, env={"FOXHUNT_STRATEGY__EMA_CROSS__FAST": "4"})
    with pytest.raises(ConfigError, match=r"other strategy settings \(strategy.ema_cross.fast\)"):
        await run_daemon(store, other, RunRequest("j", synthetic(100, clock), clock), FINGERPRINT, paper_operations())


@pytest.mark.parametrize("policy", ["cancel", "leave"])
async def test_a_deliberate_stop_cancels_working_orders_first_or_leaves_them_by_policy(policy):
    # a venue slower than the feed's last minute: the last orders are still working when the run stops
    cfg = config.load(None, env={"FOXHUNT_VENUE__LATENCY_NS": str(60 * 10**9), "FOXHUNT_RUN__ON_STOP": policy})
    store = MemoryJournalStore()
    clock = EventClock()
    await run_daemon(store, cfg, RunRequest("j", synthetic(3000, clock), clock, max_events=2500),
                     FINGERPRINT, paper_operations())
    recorded = await messages(store, "j")
    stop_commands = [m for m in recorded if type(m).__name__ == "AdminCommand"]
    if policy == "cancel":
        (cancel,) = stop_commands
        assert cancel.args == ["all"] and cancel.reason == "stop policy on_stop=cancel: max-events"
        tail = recorded[recorded.index(cancel):]
        assert sum(type(m).__name__ == "CancelOrder" for m in tail) >= 1
        trading = await trading_config(store, "j", None, None)
        assert (await replay.verify(store, "j", trading))["trading_state"] == "ACTIVE"
    else:
        assert stop_commands == []


class _StillBacklogged(DiscardingJournal):
    """A journal whose queue stays past one batch however often it is relieved (the PostgreSQL writer's
    queue between `batch_max` and `queue_max`): relieve() lets the writer run and returns."""

    backlogged = True

    def __init__(self) -> None:
        super().__init__()
        self.reliefs = 0

    async def relieve(self) -> None:
        self.reliefs += 1
        await anyio.lowlevel.checkpoint()


async def test_a_journal_still_backlogged_after_relief_slows_the_loop_but_every_input_is_taken_once():
    from foxhunt.adapters.venues.sim import SimVenue
    from foxhunt.config import SimVenueConfig
    from foxhunt.messages.orders import Side
    from foxhunt.runtime.loop import TradingLoop
    from tests.fakes import kernel as make_kernel

    k, strategy = make_kernel(lambda q, ctx: ctx.submit("EURUSD", Side.BUY, parse_fixed("1000")))
    journal = _StillBacklogged()
    loop = TradingLoop(k, SimVenue(k.instruments, SimVenueConfig(), EventClock()), journal)
    for i in range(50):
        await loop.take(quote(1_000 + i, "1.10000", "1.10010"))
    assert journal.reliefs == 50 + 50 * 2  # every quote and, behind each, its order's two venue reports
    assert loop.inputs == 150
    assert len(k.orders.by_id) == 50 and not k.orders.open  # each market order accepted and filled


class SteppedSystemClock:
    """A system clock and a monotonic clock for WallClock, advanced by hand; `step` moves only the first."""

    def __init__(self) -> None:
        self.wall, self.mono = 1_800_000_000_000_000_000, 5_000_000_000

    def tick(self, ns: int) -> None:
        self.wall += ns
        self.mono += ns


@pytest.mark.faults
def test_the_live_clock_never_runs_backwards_nor_stands_still_when_the_system_clock_steps_back():
    system = SteppedSystemClock()
    clock = WallClock(read=lambda: system.wall, monotonic=lambda: system.mono)
    steps: list[tuple[int, int]] = []
    clock.on_step_back = lambda step, held: steps.append((step, held))
    before = clock.now()
    system.wall -= 3_600_000_000_000  # an hour back
    system.tick(1_000_000)
    during = clock.now()
    assert during == before + 1_000_000  # ran on at the monotonic clock's rate, from where it was
    assert steps == [(3_600_000_000_000, during)]  # told once, with the step's size
    for _ in range(5):
        system.tick(500_000_000)
        assert clock.now() > during
        during = clock.now()
    assert len(steps) == 1
    system.wall += 3_600_000_000_000  # the system clock is put right: it leads again
    assert clock.now() == system.wall
    system.wall -= 2_000_000_000  # a second step back is a second record
    assert clock.now() > system.wall and steps[-1][0] == 2_000_000_000 and len(steps) == 2
    system.wall += 2_000_000_000 - 500_000  # a lag under a millisecond between the two rates is no step
    clock.now()
    assert len(steps) == 2


@pytest.mark.faults
async def test_a_run_journals_a_step_back_of_the_system_clock_once_and_its_inputs_keep_their_order():
    system = SteppedSystemClock()
    clock = WallClock(read=lambda: system.wall, monotonic=lambda: system.mono)

    def feed():
        for i, msg in enumerate(synthetic(3000, clock)):
            system.tick(2_000_000)  # two milliseconds a quote
            if i == 1000:
                system.wall -= 3_600_000_000_000  # the system clock an hour back, for good
            yield msg

    store = MemoryJournalStore()
    summary = await run_daemon(store, CFG, RunRequest("j", feed(), clock), FINGERPRINT, paper_operations())
    recorded = await messages(store, "j")
    held = [m for m in recorded if type(m).__name__ == "ClockHeld"]
    assert len(held) == 1 and held[0].step_ns >= 3_600_000_000_000 - 10_000_000
    stamps = [m.ts_init for m in recorded if type(m).__name__ == "QuoteTick"]
    assert len(stamps) == 3000 and stamps == sorted(stamps)  # the feed's stamps never went backwards
    assert stamps[1001] - stamps[1000] == 2_000_000  # nor stood still: they ran on at the monotonic rate
    assert summary["orders"] > 0
    trading = await trading_config(store, "j", None, None)
    await replay.verify(store, "j", trading)  # and the journal replays, its ClockHeld included
