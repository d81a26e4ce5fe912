"""Clocks. The kernel never reads one: inputs carry `ts_init`, stamped here by the runtime.

Sources stamp inputs as they take them in (`stamp`); the trading loop `advance`s the clock to each input
it handles, so what the venue stamps on its reports is the time of the input being handled, however far
ahead a recorded feed has run on the bus.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class WallClock:
    """Live trading: inputs are stamped with the time foxhunt took them in, on a clock that never runs
    backwards. The system clock may be stepped back (NTP, an operator); this clock then does not follow it,
    but runs on from where it was at the rate of the monotonic clock until the system clock catches up, so
    throttles and windows in the inputs' time neither see time reversed nor stand still. Each step back is
    told once, with its size, to `on_step_back` (the daemon journals it as a `ClockHeld` input); a lag of
    less than `TOLERANCE_NS` between the two clocks' rates is not a step."""

    name = "wall"
    TOLERANCE_NS = 1_000_000

    def __init__(self, read: Callable[[], int] = time.time_ns, monotonic: Callable[[], int] = time.monotonic_ns):
        self._read, self._monotonic = read, monotonic
        self._last = 0  # the last time this clock gave, and the monotonic clock then
        self._last_mono = 0
        self._held = False  # the system clock is behind: this clock runs on the monotonic clock
        self.on_step_back: Callable[[int, int], None] | None = None  # (step_ns, the time held)

    def now(self) -> int:
        wall, mono = self._read(), self._monotonic()
        ran_on = self._last + (mono - self._last_mono)
        if wall >= ran_on or not self._last:
            self._held = False
            self._last, self._last_mono = wall, mono
            return wall
        if not self._held and ran_on - wall >= self.TOLERANCE_NS:
            self._held = True
            if self.on_step_back is not None:
                self.on_step_back(ran_on - wall, ran_on)
        self._last, self._last_mono = ran_on, mono
        return ran_on

    def stamp(self, ts_event: int) -> int:
        return self.now()

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
