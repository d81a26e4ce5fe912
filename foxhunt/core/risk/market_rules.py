"""Market rules as their texts write them: rulebooks, exchange time, the LULD bands and the market-wide
circuit breakers. Pure functions and one small clock; the breakers (core/risk/breakers.py) apply them.

Two rulebooks; each instrument names the one that applies to it (`[risk] rulebook`, per instrument under
`[risk.instruments.X]`):

- `us_equities`: US NMS stocks as the rules write them. Time of day is New York's (America/New_York, with
  daylight saving time, from the IANA time zone database through zoneinfo), and the rules apply in the
  regular session, 9:30 a.m. to 4:00 p.m. ET.
  - Limit Up-Limit Down (the Plan to Address Extraordinary Market Volatility, as amended; the band
    doubling at the open ended when the Plan became permanent in April 2019, Eighteenth Amendment):
    the percentage parameter comes from the stock's previous closing price, once a day (Appendix A):
    Tier 1 and Tier 2 stocks above $3.00: 5% and 10%; from $0.75 up to and including $3.00: 20%; below
    $0.75: the lesser of $0.15 and 75%. The reference price (the mean price of the last five minutes,
    Section I(T)) only centres the band. The percentages double from 3:35 p.m. to the close, for Tier 1
    stocks and for Tier 2 stocks whose previous close is $3.00 or less (Section V(A), Appendix A). A
    stock that stays in a limit state for 15 seconds enters a five-minute Trading Pause (Section VII).
  - Market-wide circuit breakers (NYSE Rule 7.12, FINRA Rule 6121): declines of the S&P 500 from its
    previous close of 7% (Level 1), 13% (Level 2) and 20% (Level 3). A Level 1 or Level 2 decline halts
    trading for 15 minutes if it happens before 3:25 p.m. ET and does not halt it at or after 3:25 p.m.;
    each level halts at most once a day. A Level 3 decline halts trading for the rest of the day, at any
    time of the session.
- `around_the_clock`: foxhunt's policy for markets with no close (FX, crypto): bands in the style of LULD
  by tier around the moving reference, doubled in the first 15 and the last 25 minutes of a day in a
  fixed UTC offset (`band_utc_offset_minutes`, so a replay elsewhere can never differ); the market-wide
  breaker's reference is the index's first mark of the UTC day, and its levels halt at any time.

The previous close comes from the data (the last mark of the previous regular session, the kernel
keeps it) or, before the data has one, from the configuration (`prior_close` of the instrument).
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

RULEBOOKS = ("around_the_clock", "us_equities")
NEW_YORK = ZoneInfo("America/New_York")

# the regular session of US equities, minutes of the day in New York time
OPEN, CLOSE = 9 * 60 + 30, 16 * 60
LULD_DOUBLED_FROM = 15 * 60 + 35  # LULD Plan, Section V(A): the last 25 minutes of regular trading hours
MWCB_NO_HALT_FROM = 15 * 60 + 25  # NYSE Rule 7.12(a)(1)-(2): Level 1 and 2 halt only before 3:25 p.m.
MWCB_LEVELS_PCT = (7.0, 13.0, 20.0)  # NYSE Rule 7.12(a): Level 1, 2, 3 of the S&P 500's decline
MWCB_HALT_MINUTES = 15

# around_the_clock: the band doubles in the first 15 and last 25 minutes of the day in its fixed offset
_CLOCK_DOUBLED_UNTIL = 9 * 60 + 45
_CLOCK_DOUBLED_FROM = 15 * 60 + 35

MINUTE_NS = 60_000_000_000
HOUR_NS = 60 * MINUTE_NS


class ExchangeClock:
    """Event time (ns since the epoch, UTC) as an exchange's (day number, minute of the day). Offsets
    change only on whole UTC hours (daylight saving time starts and ends at 2:00 local time), so the
    offset is looked up once per UTC hour."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self.hour = -1
        self.offset_minutes = 0

    def local(self, ts: int) -> tuple[int, int]:
        hour = ts // HOUR_NS
        if hour != self.hour:
            offset = datetime.fromtimestamp(hour * 3600, UTC).astimezone(self.zone).utcoffset()
            self.hour, self.offset_minutes = hour, int(offset.total_seconds()) // 60 if offset is not None else 0
        minutes = ts // MINUTE_NS + self.offset_minutes
        return minutes // 1440, minutes % 1440

    def __getstate__(self) -> dict:  # a kernel snapshot: the zone by name
        return {"zone": self.zone.key, "hour": self.hour, "offset_minutes": self.offset_minutes}

    def __setstate__(self, state: dict) -> None:
        self.zone, self.hour, self.offset_minutes = ZoneInfo(state["zone"]), state["hour"], state["offset_minutes"]


class SessionCloses:
    """Each symbol's previous close, from the marks: the last mark of the latest regular session before
    the day (a day without a session, a weekend, carries the close before it over)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[int, float]] = {}  # symbol -> (day, its last mark in the session so far)
        self.prior: dict[str, float] = {}

    def on_mark(self, symbol: str, day: int, minute_of_day: int, price: float) -> float | None:
        """The previous close of `symbol` as of this mark (None before the data has one)."""
        last = self.last.get(symbol)
        if last is not None and last[0] < day:
            self.prior[symbol] = last[1]
        if in_session(minute_of_day):
            self.last[symbol] = (day, price)
        return self.prior.get(symbol)


def in_session(minute_of_day: int) -> bool:
    """Within US equities' regular session (9:30 a.m. to 4:00 p.m., New York time)."""
    return OPEN <= minute_of_day < CLOSE


def luld_percent_width(price_class: float, reference: float, tier: int) -> float:
    """The LULD band's half-width (Appendix A): the percentage parameter the price class (the previous
    close under the Plan) gives, applied to the reference price; below $0.75, the lesser of $0.15 and 75%."""
    if price_class > 3.0:
        return reference * (0.05 if tier == 1 else 0.10)
    if price_class >= 0.75:
        return reference * 0.20
    return min(0.15, reference * 0.75)


def plan_band(reference: float, tier: int, minute_of_day: int, prior_close: float | None = None) -> tuple[float, float]:
    """(lower, upper) LULD band under the Plan: the percentage from `prior_close` (the reference's own
    price class when it is not known), doubled from 3:35 p.m. for Tier 1 and for Tier 2 at $3.00 or less;
    `minute_of_day` in New York time."""
    price_class = reference if prior_close is None else prior_close
    width = luld_percent_width(price_class, reference, tier)
    if minute_of_day >= LULD_DOUBLED_FROM and (tier == 1 or price_class <= 3.0):
        width *= 2
    return max(reference - width, 0.0), reference + width


def clock_band(reference: float, tier: int, minute_of_day: int) -> tuple[float, float]:
    """(lower, upper) band of the around_the_clock policy: the percentage from the reference itself,
    doubled before 9:45 and from 15:35 in the policy's fixed offset."""
    width = luld_percent_width(reference, reference, tier)
    if minute_of_day < _CLOCK_DOUBLED_UNTIL or minute_of_day >= _CLOCK_DOUBLED_FROM:
        width *= 2
    return max(reference - width, 0.0), reference + width


def mwcb_level(prior_close: float, price: float, levels: tuple[float, ...] = MWCB_LEVELS_PCT) -> int:
    """How many of the levels the decline from `prior_close` to `price` reaches (0 to 3)."""
    decline = (prior_close - price) / prior_close * 100
    return sum(1 for threshold in levels if decline >= threshold)


def mwcb_halt(
    prior_close: float, price: float, minute_of_day: int, levels: tuple[float, ...] = MWCB_LEVELS_PCT,
    halt_minutes: int = MWCB_HALT_MINUTES,
) -> tuple[int, int | None]:
    """(level, halt minutes) of the market-wide circuit breaker for the index at `price`, New York time:
    Level 1 and 2 halt `halt_minutes` before 3:25 p.m. and 0 from then on; Level 3 halts for the rest of the
    day (None); no level, 0."""
    level = mwcb_level(prior_close, price, levels)
    if level == 3:
        return 3, None
    if level == 0 or minute_of_day >= MWCB_NO_HALT_FROM:
        return level, 0
    return level, halt_minutes
