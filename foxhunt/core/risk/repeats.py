"""A denial storm, bounded: the first denial of a request is journaled, its repeats inside a window counted.

A strategy that asks again and again for what the gate denies (on every quote while trading is halted, or
while the order throttle is full) would otherwise write its request and the denial for every ask: at 20,000
quotes a second, ema_cross did so 390,000 times a minute under the throttle (docs/benchmarks.md, the outage
soak), an incident's record drowns in it, and so does the queue that holds events while the database is
away. So the kernel keys each denial by who asked for what and why: the
strategy, the symbol, the kind of request, its side and the denial's reason (`key`). The first denial of a
key opens a window of `[risk] repeated_denial_window_ms` on the run's clock and is journaled in full, its
request with it. Each later denial of the key inside the window is counted and not journaled (its order
still ends DENIED, and its strategy still hears of it). The window closes at the first input at or past its
end, or when the run starts or stops, and derives one `DenialsRepeated` with the count, if there were any
repeats; the next denial of the key opens a new window.

Everything here is kernel state, derived from the inputs on the run's clock: replay holds back the same
denials and derives the same summaries. A window of 0 (off) journals every denial.
"""

from __future__ import annotations

NEVER = 2**62 - 1  # no window open: no input reaches this time (2116), and a compiled int holds it unboxed

Key = tuple[str, str, str, str, str]  # (strategy_id, symbol, request kind, side, reason)


class Window:
    """One key's open window: the journaled denial that opened it, and the repeats held back since."""

    __slots__ = ("ends_ns", "first_order_id", "last_order_id", "repeats", "since_ns")

    def __init__(self, order_id: str, since_ns: int, ends_ns: int) -> None:
        self.first_order_id = order_id
        self.last_order_id = order_id
        self.since_ns = since_ns
        self.ends_ns = ends_ns
        self.repeats = 0


class RepeatedDenials:
    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns  # 0: off, every denial is journaled
        self.open: dict[Key, Window] = {}
        self.due_ns = NEVER  # the earliest end of an open window: the kernel closes windows once it is reached
        self.held_back = 0  # denials counted and not journaled, over the kernel's life (admin, telemetry)

    def held(self, key: Key, order_id: str, now_ns: int) -> bool:
        """Whether this denial repeats one whose window is open: counted, and not to be journaled. If not,
        it opens a window (unless they are off) and is to be journaled. The caller has closed the windows
        due at `now_ns` (`close`) first."""
        window = self.open.get(key)
        if window is not None:
            window.repeats += 1
            window.last_order_id = order_id
            self.held_back += 1
            return True
        if self.window_ns:
            ends = now_ns + self.window_ns
            self.open[key] = Window(order_id, now_ns, ends)
            self.due_ns = min(self.due_ns, ends)
        return False

    def close(self, now_ns: int) -> list[tuple[Key, Window]]:
        """Close the windows that end at or before `now_ns` (NEVER: all of them); return those that held
        repeats back, oldest first, for their summaries."""
        ended = [(key, w) for key, w in self.open.items() if w.ends_ns <= now_ns]
        for key, _ in ended:
            del self.open[key]
        self.due_ns = min((w.ends_ns for w in self.open.values()), default=NEVER)
        return [(key, w) for key, w in ended if w.repeats]

    def digest_state(self) -> object:
        return sorted([*key, w.first_order_id, w.last_order_id, w.since_ns, w.ends_ns, w.repeats]
                      for key, w in self.open.items())
