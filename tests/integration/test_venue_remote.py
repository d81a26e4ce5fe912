"""A remote venue's reports on their way to the bus (adapters/venues/remote.py: Reports): at once while
the bus has room, in order always, and never dropped when it is full."""

from __future__ import annotations

import anyio
import pytest

from foxhunt.adapters.venues import recent
from foxhunt.adapters.venues.remote import Reports
from foxhunt.core.orders import CLOSED_KEPT
from foxhunt.messages.system import VenueConnected


def report(i: int) -> VenueConnected:
    return VenueConnected(ts_event=i, ts_init=i, venue="X")


async def test_a_report_is_on_the_bus_when_emit_returns_while_the_bus_has_room():
    bus, reader = anyio.create_memory_object_stream(10)
    reports = Reports()
    async with bus, reader, anyio.create_task_group() as tg:
        tg.start_soon(reports.pump, bus)
        await anyio.wait_all_tasks_blocked()
        reports.emit(report(1))
        assert reader.receive_nowait() == report(1)  # no task had to run in between
        tg.cancel_scope.cancel()


async def test_reports_wait_in_order_for_a_full_bus_and_none_is_dropped():
    bus, reader = anyio.create_memory_object_stream(2)
    reports = Reports()
    for i in range(3):  # before the venue runs: they wait
        reports.emit(report(i))
    async with bus, reader, anyio.create_task_group() as tg:
        tg.start_soon(reports.pump, bus)
        await anyio.wait_all_tasks_blocked()
        for i in range(3, 10):  # the bus is full: these queue behind the one the pump is waiting to put
            reports.emit(report(i))
        got = []
        with anyio.fail_after(5):
            while len(got) < 10:
                got.append(await reader.receive())
        reports.emit(report(10))  # the backlog is gone: straight onto the bus again
        assert reader.receive_nowait() == report(10)
        tg.cancel_scope.cancel()
    assert [r.ts_event for r in got] == list(range(10))


async def test_a_bus_that_nobody_reads_any_more_ends_the_venue_with_an_error():
    bus, reader = anyio.create_memory_object_stream(2)
    reader.close()
    reports = Reports()
    reports.emit(report(1))  # does not raise in the callback that emits it
    with bus, pytest.raises(anyio.BrokenResourceError), anyio.fail_after(5):
        await reports.pump(bus)


def test_an_adapter_remembers_only_recent_ids_and_what_it_keeps_per_order_while_the_kernel_does():
    seen = recent.RecentSet(kept=3)
    for member in ["a", "b", "a", "c", "d"]:  # a repeated member is not added again
        seen.add(member)
    assert "a" not in seen and all(m in seen for m in "bcd") and len(seen) == 3
    per_order = {f"o{i}": i for i in range(CLOSED_KEPT + 5)}
    done = recent.DoneOrders(per_order)
    for i in range(CLOSED_KEPT + 2):
        done.add(f"o{i}")
        done.add(f"o{i}")
    assert "o0" in done and "o0" not in per_order and "o1" not in per_order and "o2" in per_order
    assert len(per_order) == CLOSED_KEPT + 3  # the two oldest done ones gone; the working ones all kept
