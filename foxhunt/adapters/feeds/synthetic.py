"""A seeded quote generator: the default feed, so foxhunt runs with no data files at all.

The mid moves by a uniform number of ticks in [-step, step] per quote: a random walk, or with `reversion`
r > 0 a mean-reverting one (a discrete Ornstein-Uhlenbeck process: each quote also pulls the mid back
towards the start price by r of the distance, rounded to ticks, so a deviation halves in about
ln 2 / r quotes). The mean-reverting market has an edge a trading agent can learn (training/rl/); the
random walk has none.

Only integer draws (`randrange`) and one multiplication by r rounded to an integer, never float helpers:
Python's Mersenne Twister gives the same integers on every platform, while helpers like `gauss` go
through libm and may differ in the last bit.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from foxhunt.errors import InputError
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.market import Instrument, QuoteTick
from foxhunt.ports import Clock

START_NS = 1_704_153_600 * 1_000_000_000  # 2024-01-02T00:00:00Z, a Tuesday


@dataclass
class SyntheticFeed:
    seed: int
    n: int
    instrument: Instrument
    start_price: int
    clock: Clock
    rate: float | None = None  # quotes per second, paced by the daemon's publisher; on the wall clock,
    # quotes are then stamped with the time they are made, like a live feed's
    reversion: float = 0.0  # the share of the mid's distance from the start price pulled back per quote
    step: int = 3  # the most ticks the mid moves by chance per quote

    @classmethod
    def from_options(cls, options: dict[str, str], instruments: dict[str, Instrument], clock: Clock):
        known = {"seed", "n", "symbol", "price", "rate", "reversion", "step"}
        if unknown := set(options) - known:
            raise InputError(f"synthetic feed: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
        symbol = options.get("symbol", "EURUSD")
        if symbol not in instruments:
            raise InputError(f"synthetic feed: symbol {symbol!r} is not a configured instrument")
        try:
            seed, n = int(options.get("seed", "7")), int(options.get("n", "100000"))
            price = parse_fixed(options.get("price", "1.10000"))
            rate = float(options["rate"]) if "rate" in options else None
            reversion, step = float(options.get("reversion", "0")), int(options.get("step", "3"))
        except ValueError as e:
            raise InputError(f"synthetic feed: {e}") from e
        if n < 0 or price <= 0 or (rate is not None and not 0 < rate < float("inf")):
            raise InputError("synthetic feed: n must be >= 0, price > 0 and rate a positive number")
        if not 0.0 <= reversion < 1.0 or not 0 < step <= 1000:
            raise InputError(f"synthetic feed: reversion must be in [0, 1) and step in 1..1000, got {reversion}"
                             f" and {step}")
        return cls(seed, n, instruments[symbol], price, clock, rate, reversion, step)

    def __iter__(self) -> Iterator[QuoteTick]:
        rng = random.Random(self.seed)
        randrange = rng.randrange
        tick = self.instrument.tick_size
        lot = self.instrument.lot_size
        symbol = self.instrument.symbol
        stamp = self.clock.stamp
        mid = centre = self.start_price - self.start_price % tick
        reversion, step = self.reversion, self.step
        ts = START_NS
        live = self.rate is not None and self.clock.name == "wall"
        for _ in range(self.n):
            ts += randrange(1, 200) * 1_000_000  # 1 to 199 ms apart
            if live:  # paced in real time: a live feed, whose quotes carry the time they arrive
                ts = self.clock.now()
            pull = round((centre - mid) // tick * reversion) * tick if reversion else 0
            mid = max(mid + randrange(-step, step + 1) * tick + pull, 10 * tick)
            half = randrange(1, 3) * tick
            yield QuoteTick(
                ts_event=ts,
                ts_init=stamp(ts),
                symbol=symbol,
                bid=mid - half,
                ask=mid + half,
                bid_size=randrange(50, 3000) * lot,  # 50 to 2999 lots: big orders sometimes fill in parts
                ask_size=randrange(50, 3000) * lot,
            )
