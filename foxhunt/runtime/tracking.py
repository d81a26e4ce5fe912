"""What a report shows of a run (`Run`), kept by a `Tracker` from the run's events in journal order beside
the kernel that handles its inputs: the equity per currency and the positions over time (read from the
kernel after each input, thinned to at most `MAX_SAMPLES`, halving as they grow), the fills, round trips
(from the kernel's `PositionChanged`), the pre-trade gate's denials with their reasons, the trading state's
and instruments' changes, the venue's acknowledgement latency (on a wall clock run), the model scores and
an agent's targets. runtime/report.py draws it.

The tracker follows every event of a backtest that is reported on (`foxhunt replay --report`, each point of
`foxhunt sweep` for its Sharpe ratio), so this module is compiled by mypyc (foxhunt/compiled.py). Money in
nanos becomes a float through `fixed_point.ratio`, which divides two ints as Python does (correctly
rounded) where mypyc alone would divide their doubles.
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from dataclasses import dataclass, field

from foxhunt.core.kernel import Kernel
from foxhunt.messages.base import Message
from foxhunt.messages.fixed_point import SCALE, ratio
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.orders import (
    DenialsRepeated,
    OrderAccepted,
    OrderDenied,
    OrderFilled,
    OrderPartiallyFilled,
    SubmitOrder,
)
from foxhunt.messages.scores import ModelScored, ModelsLoaded, PolicyActed
from foxhunt.messages.system import (
    ClockHeld,
    FeedGap,
    InstrumentStateChanged,
    PositionChanged,
    RunStarted,
    RunStopped,
    TradingStateChanged,
    VenueDisconnected,
)

MAX_SAMPLES = 20_000  # equity and position points kept per run; more are thinned by halving

def _series() -> defaultdict[str, list[float]]:
    return defaultdict(list)


def _sums() -> defaultdict[str, float]:
    return defaultdict(float)


def _arrays() -> defaultdict[str, array[float]]:
    return defaultdict(_doubles)


def _doubles() -> array[float]:
    return array("d")


@dataclass
class Run:
    """What a report shows of one run."""

    label: str
    clock: str = "feed"
    fingerprint: dict[str, str] = field(default_factory=dict)
    start: int = 0  # event time of the window's first and last input
    end: int = 0
    events: int = 0
    ts: list[int] = field(default_factory=list)  # samples after an input
    equity: dict[str, list[float]] = field(default_factory=_series)  # currency -> money
    position: dict[str, list[float]] = field(default_factory=_series)  # symbol -> quantity
    mid: dict[str, list[float]] = field(default_factory=_series)  # symbol -> mid (nan: none)
    # ts, symbol, side, quantity, price, commission
    fills: list[tuple[int, str, str, float, float, float]] = field(default_factory=list)
    notional: dict[str, float] = field(default_factory=_sums)  # currency -> traded
    trips: list[tuple[int, str, str, float]] = field(default_factory=list)  # close ts, symbol, currency, pnl
    denials: list[tuple[int, str, str, int]] = field(default_factory=list)  # ts, symbol, reason, how many
    states: list[tuple[int, str, str]] = field(default_factory=list)  # ts, what, detail
    latencies_ms: list[float] = field(default_factory=list)
    scores: list[tuple[int, str, float, int, int]] = field(default_factory=list)  # ts, symbol, score, index, horizon
    # an agent's targets (PolicyActed): ts, symbol, fraction of trade size, where it changed; and how many decisions
    targets: list[tuple[int, str, float]] = field(default_factory=list)
    decisions: int = 0
    # every market data event's mid per symbol, from a run's ModelsLoaded on (a run that scores), to meet the scores
    mids_by_symbol: dict[str, array[float]] = field(default_factory=_arrays)
    exposed_ns: int = 0
    peak_gross: float = 0.0
    summary: dict[str, object] = field(default_factory=dict)  # the kernel's end-of-run summary figures
    currency_of: dict[str, str] = field(default_factory=dict)


class Tracker:
    """Keeps a Run from events given in journal order, beside the kernel that handles the inputs."""

    def __init__(self, kernel: Kernel, label: str, start: int | None = None, end: int | None = None) -> None:
        self.kernel = kernel
        self.run = Run(label)
        self.window = (start if start is not None else -(2**63), end if end is not None else 2**63)
        self.stride = 1
        self.seen = 0
        self.last_ts: int | None = None
        self.offset: dict[str, float] = {}  # equity at the window's start, per currency: the report starts at 0
        self.orders: dict[str, int] = {}  # order id -> when the command was decided (wall clock runs)
        self.cause_ts = 0
        self.trip: dict[str, tuple[int, int]] = {}  # symbol -> (realized - commissions at the trip's open, sign)
        self.scoring = False  # a ModelsLoaded came: mids are kept to meet the scores
        self.pending = False  # an input was taken whose resulting state is not sampled yet

    def append(self, message: Message, causation: int | None = None) -> int:
        if causation is None:
            self._sample()
            self._input(message)
        else:
            self._derived(message)
        return 0

    def finish(self) -> Run:
        self._sample()
        run = self.run
        for symbol, pos in self.kernel.portfolio.positions.items():
            run.currency_of[symbol] = pos.currency
        return run

    def _in_window(self, ts: int) -> bool:
        return self.window[0] <= ts < self.window[1]

    def _input(self, msg: Message) -> None:
        ts = msg.ts_event
        self.cause_ts = msg.ts_init
        if type(msg) is RunStarted:
            self.run.clock, self.run.fingerprint = msg.clock, dict(msg.fingerprint)
            return
        inside = ts > 0 and self._in_window(ts)  # markers stamped 0 (a venue connected at start) come before time
        if inside:
            run = self.run
            if run.events == 0:
                run.start = ts
                self.offset = self._equity()
            if ts > run.end:  # noqa: PLR1730 - cheaper than max() on every input
                run.end = ts
            run.events += 1
            if self.last_ts is not None:
                for p in self.kernel.portfolio.positions.values():
                    if p.quantity:  # exposed since the last input
                        run.exposed_ns += max(0, ts - max(self.last_ts, run.start))
                        break
            self.last_ts = ts
            self.pending = True
        if type(msg) is QuoteTick or type(msg) is TradeTick or type(msg) is Bar:
            if self.scoring:
                self.run.mids_by_symbol[msg.symbol].append(_mid(msg))
        elif type(msg) is ModelsLoaded:
            self.scoring = True
        elif type(msg) is OrderFilled or type(msg) is OrderPartiallyFilled:
            if inside:
                qty, price = ratio(msg.last_qty, SCALE), ratio(msg.last_price, SCALE)
                pos = self.kernel.portfolio.positions.get(msg.symbol)
                multiplier = pos.multiplier if pos is not None else 1
                instrument = self.kernel.instruments.get(msg.symbol)
                currency = instrument.currency if instrument is not None else "?"
                self.run.fills.append((ts, msg.symbol, msg.side.value, qty, price, ratio(msg.commission, SCALE)))
                self.run.notional[currency] += qty * price * multiplier
        elif type(msg) is OrderAccepted:
            decided = self.orders.pop(msg.order_id, None)
            if decided is not None and inside and self.run.clock == "wall":
                self.run.latencies_ms.append((msg.ts_init - decided) / 1e6)
        elif type(msg) is ModelScored:
            if inside and msg.outputs:
                middle = len(msg.quantiles) // 2
                index = len(self.run.mids_by_symbol[msg.symbol]) - 1  # the market data the score is as of
                self.run.scores.append((ts, msg.symbol, float(msg.outputs[middle]), index, msg.horizons[0]))
        elif type(msg) is PolicyActed:
            if inside:
                self.run.decisions += 1
                last = next((t for t in reversed(self.run.targets) if t[1] == msg.symbol), None)
                if last is None or last[2] != msg.fraction:
                    self.run.targets.append((ts, msg.symbol, msg.fraction))
        elif inside and type(msg) in (ClockHeld, FeedGap, VenueDisconnected, RunStopped):
            detail = getattr(msg, "reason", "") or getattr(msg, "source", "")
            self.run.states.append((ts, type(msg).__name__, str(detail)))

    def _derived(self, msg: Message) -> None:
        ts = self.last_ts if self.last_ts is not None else msg.ts_event
        inside = self._in_window(ts)
        if type(msg) is SubmitOrder:
            self.orders[msg.order_id] = self.cause_ts
        elif type(msg) is OrderDenied and inside:
            self.run.denials.append((ts, msg.symbol, msg.reason, 1))
        elif type(msg) is DenialsRepeated and inside:
            self.run.denials.append((ts, msg.symbol, msg.reason, msg.repeats))
        elif type(msg) is TradingStateChanged and inside:
            self.run.states.append((ts, "trading state", f"{msg.previous.value} -> {msg.state.value}: {msg.cause}"))
        elif type(msg) is InstrumentStateChanged and inside:
            what = "paused" if msg.paused else "resumed"
            self.run.states.append((ts, "instrument", f"{msg.symbol} {what}: {msg.cause}"))
        elif type(msg) is PositionChanged:
            self._round_trip(msg, ts, inside)

    def _round_trip(self, msg: PositionChanged, ts: int, inside: bool) -> None:
        closed = msg.realized_pnl - msg.commissions
        sign = (msg.quantity > 0) - (msg.quantity < 0)
        opened = self.trip.get(msg.symbol)
        if opened is None:
            if sign:
                self.trip[msg.symbol] = (closed, sign)
            return
        if sign == opened[1]:
            return
        if inside:
            currency = self.kernel.instruments[msg.symbol].currency
            self.run.trips.append((ts, msg.symbol, currency, ratio(closed - opened[0], SCALE)))
        if sign:
            self.trip[msg.symbol] = (closed, sign)
        else:
            del self.trip[msg.symbol]

    def _equity(self) -> dict[str, float]:
        """Equity per currency, money: realised and unrealised PnL less commissions, summed in the positions'
        order."""
        out: dict[str, float] = {}
        for pos in self.kernel.portfolio.positions.values():
            out[pos.currency] = out.get(pos.currency, 0.0) + ratio(
                pos.realized_pnl + pos.unrealized_pnl - pos.commissions, SCALE)
        return out

    def _sample(self) -> None:
        """After an input (where one is pending): the largest gross position, and every `stride`-th time the
        equity, positions and mids, each series padded where it begins later than the others. This runs after
        every input of a backtest, so it is written for speed: no sets or temporaries where the symbols and
        currencies are those it has seen."""
        if not self.pending:
            return
        self.pending = False
        positions = self.kernel.portfolio.positions
        gross = 0
        for p in positions.values():
            gross += abs(p.unrealized_pnl + p.cost)
        run = self.run
        at_market = ratio(gross, SCALE)
        if at_market > run.peak_gross:  # noqa: PLR1730 - cheaper than max() on every input
            run.peak_gross = at_market
        self.seen += 1
        if self.seen % self.stride:
            return
        run.ts.append(self.last_ts or 0)
        n = len(run.ts)
        offset = self.offset
        for currency, value in self._equity().items():
            column = run.equity.get(currency)
            if column is None:
                column = run.equity[currency] = [0.0] * (n - 1)
            column.append(value - offset.get(currency, 0.0))
        market = self.kernel.market
        if not (positions.keys() <= run.position.keys() and market.keys() <= run.position.keys()):
            for symbol in (*positions, *market):  # a symbol first seen: its series begin here
                if symbol not in run.position:
                    run.position[symbol], run.mid[symbol] = [math.nan] * (n - 1), [math.nan] * (n - 1)
        for symbol, column in run.position.items():
            pos = positions.get(symbol)
            column.append(ratio(pos.quantity, SCALE) if pos else 0.0)
            quote = market.get(symbol)
            run.mid[symbol].append(_mid(quote) if quote is not None else math.nan)
        for currency, column in run.equity.items():
            if len(column) < n:  # no position in it now
                column.append(0.0 - offset.get(currency, 0.0))
        if n >= 2 * MAX_SAMPLES:
            self.stride *= 2
            run.ts[:] = run.ts[1::2]
            for series in (run.equity, run.position, run.mid):
                for key in series:
                    series[key][:] = series[key][1::2]



def _mid(msg: QuoteTick | TradeTick | Bar) -> float:
    if isinstance(msg, QuoteTick):
        return ratio(msg.bid + msg.ask, 2) / float(SCALE)  # Python's ((bid + ask) / 2) / SCALE
    if isinstance(msg, TradeTick):
        return ratio(msg.price, SCALE)
    return ratio(msg.close, SCALE)


