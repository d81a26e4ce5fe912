"""Clocks. The kernel never reads one: inputs carry `ts_init`, stamped here by the runtime.

Sources stamp inputs as they take them in (`stamp`); the trading loop `advance`s the clock to each input
it handles, so what the venue stamps on its reports is the time of the input being handled, however far
ahead a recorded feed has run on the bus.
"""

from __future__ import annotations

import time


class WallClock:
    """Live trading: inputs are stamped with the time foxhunt took them in."""

    name = "wall"

    def now(self) -> int:
        return time.time_ns()

    def stamp(self, ts_event: int) -> int:
        return time.time_ns()

    def advance(self, ts: int) -> None:
        pass


class EventClock:
    """Recorded feeds (`--clock feed`) and replay: time is the timestamp of the input being handled."""

    name = "feed"

    def __init__(self) -> None:
        self._now = 0

    def now(self) -> int:
        return self._now

    def stamp(self, ts_event: int) -> int:
        return ts_event

    def advance(self, ts: int) -> None:
        if ts > self._now:
            self._now = ts
