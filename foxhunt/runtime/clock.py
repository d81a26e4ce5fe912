"""Clocks. The kernel never reads one: inputs carry `ts_init`, stamped here by the runtime."""

from __future__ import annotations

import time


class WallClock:
    """Live trading: inputs are stamped with the time foxhunt took them in."""

    name = "wall"

    def now(self) -> int:
        return time.time_ns()

    def stamp(self, ts_event: int) -> int:
        return time.time_ns()


class EventClock:
    """Recorded feeds (`--clock feed`) and replay: time is the timestamp of the latest input."""

    name = "feed"

    def __init__(self) -> None:
        self._now = 0

    def now(self) -> int:
        return self._now

    def stamp(self, ts_event: int) -> int:
        if ts_event > self._now:
            self._now = ts_event
        return ts_event

    def set(self, ts: int) -> None:
        self._now = ts
