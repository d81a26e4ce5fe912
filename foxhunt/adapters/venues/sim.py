"""The simulated venue: deterministic fills against the quote stream, in event time.

Used by paper trading and by backtest replay, so it must be a pure function of the commands and market
data it is given, in order. Rules (documented here, pinned by tests):

- Commands take effect `latency_ns` after the input that caused them, in market time: a command is
  processed when market data at or after its due time arrives, against the book as it stood before that
  data (with zero latency, at once against the current book).
- Buy orders trade at the ask, sell orders at the bid. A marketable limit order trades at the touch,
  which is at least as good as its limit; a resting limit order trades when the touch reaches it.
- A stop order becomes a market order once the touch reaches its trigger (ask >= trigger for a buy,
  bid <= trigger for a sell).
- Where the feed publishes sizes, a fill takes at most the quoted size (rounded down to lots), and the
  size is used up for the rest of that quote; without sizes (0), orders fill in full.
- IOC cancels what does not fill at once; FOK fills in full at once or is canceled whole; DAY orders
  expire at the first market data of a later UTC day; GTC rests until filled or canceled.
- Crossed or locked quotes are ignored, like the kernel ignores them. A bar moves its own side of the
  book (BID or ASK), or both (MID, LAST); a side never quoted takes the other side's price.
- Commission is `fee_bps` basis points of the traded value, floor-rounded to nanos.
- Every fill carries its execution id and the order's cumulative quantity, as the Venue port asks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Protocol, cast

import anyio
from mypy_extensions import mypyc_attr

from foxhunt.messages.base import Input, nanos
from foxhunt.messages.fixed_point import mul, times
from foxhunt.messages.market import Bar, Instrument, MarketData, PriceType, QuoteTick
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)
from foxhunt.messages.system import VenueConnected

DAY_NS: Final = 86_400 * 1_000_000_000
# members used on the order path, looked up once: an Enum member read through its class costs about 75 ns on
# Python 3.11 (EnumType.__getattr__ keeps the lookup from being specialised); compiled by mypyc, a Final is a
# C static, where a module global is a lookup in the module's namespace
_BUY: Final = Side.BUY
_MARKET: Final = OrderType.MARKET
_LIMIT: Final = OrderType.LIMIT
_STOP: Final = OrderType.STOP
_FOK: Final = TimeInForce.FOK
_IMMEDIATE: Final = frozenset({TimeInForce.IOC, TimeInForce.FOK})
_NOTHING: Final[list[Input]] = []  # shared and never appended to: what on_market returns when nothing happens


@dataclass(slots=True)
class _Book:
    bid: int = 0
    ask: int = 0
    bid_size: int = 0  # 0: size not published, fills unlimited
    ask_size: int = 0


@mypyc_attr(acyclic=True)  # strings, members and numbers, nothing that leads back: the collector need not track it
class _Working:
    """An order at the venue, its terms read from the command once: compiled by mypyc, its fields are read
    in C, where a command's are read through Python's attribute lookup, and validating and matching an order
    reads them a dozen times. (A plain class: a dataclass's generated __init__ would run as Python.)"""

    def __init__(self, cmd: SubmitOrder, day: int) -> None:
        self.order_id = cmd.order_id
        self.symbol = cmd.symbol
        self.side = cmd.side
        self.kind = cmd.order_type
        self.time_in_force = cmd.time_in_force
        self.quantity = cmd.quantity
        self.leaves = self.quantity
        self.price = cmd.price
        self.trigger = cmd.trigger_price
        self.day = day
        self.triggered = False


class SimVenueSettings(Protocol):
    """What the simulated venue is configured with (config.SimVenueConfig, `[venue]`)."""

    @property
    def name(self) -> str: ...
    @property
    def latency_ns(self) -> int: ...  # from an order's arrival to its first chance to match
    @property
    def fee_bps(self) -> Decimal: ...  # commission, in basis points of the notional


class SimVenue:
    def __init__(self, instruments: dict[str, Instrument], config: SimVenueSettings, clock) -> None:
        self.name = config.name
        self.instruments = instruments
        self.latency = config.latency_ns
        self.fee_bps = nanos(config.fee_bps)
        self.clock = clock  # anything with now() -> int ns: stamps ts_init of reports
        self.books: dict[str, _Book] = {}
        self.pending: deque[tuple[int, SubmitOrder | CancelOrder | ReplaceOrder]] = deque()
        self.working: dict[str, _Working] = {}
        self.now = 0
        self._ids = 0
        self._out: list[Input] = []

    # --- port ------------------------------------------------------------------------------------

    keeps_orders = False  # its book lives in this process only

    async def run(self, bus, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        """Nothing arrives later: every report is returned by send() and on_market()."""
        task_status.started()

    def connect(self) -> list[Input]:
        return [VenueConnected(ts_event=self.now, ts_init=self.clock.now(), venue=self.name)]

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> list[Input]:
        self._out = []
        if self.latency:
            self.pending.append((max(self.now, cmd.ts_event) + self.latency, cmd))
        else:
            self._process(cmd)
        return self._out

    def on_market(self, msg: MarketData) -> list[Input]:
        ts = msg.ts_event
        if not self.pending and not self.working:  # the common case: nothing to match, only the book moves
            if ts > self.now:
                self.now = ts
            book = self.books.get(msg.symbol)
            if type(msg) is QuoteTick and book is not None and 0 < msg.bid < msg.ask:
                book.bid, book.ask, book.bid_size, book.ask_size = msg.bid, msg.ask, msg.bid_size, msg.ask_size
            else:
                self._update_book(msg)
            return _NOTHING
        self._out = []
        while self.pending and self.pending[0][0] <= ts:
            self.now = max(self.now, self.pending[0][0])
            self._process(self.pending.popleft()[1])
        if ts > self.now:
            if self.working and ts // DAY_NS > self.now // DAY_NS:
                self._expire_day_orders(ts // DAY_NS)
            self.now = ts
        book = self._update_book(msg)
        if book is not None and self.working:
            for w in list(self.working.values()):
                if w.symbol == msg.symbol:
                    self._match(w, book)
        return self._out

    # --- commands --------------------------------------------------------------------------------

    def _process(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> None:
        match cmd:
            case SubmitOrder():
                self._submit(cmd)
            case CancelOrder():
                order_id, symbol = cmd.order_id, cmd.symbol
                if self.working.pop(order_id, None) is None:
                    self._emit(OrderCancelRejected, order_id, symbol, reason="UNKNOWN_ORDER: not working at the venue")
                else:
                    self._emit(OrderCanceled, order_id, symbol, reason=cmd.reason)
            case ReplaceOrder():
                self._replace(cmd)

    def _submit(self, cmd: SubmitOrder) -> None:
        w = _Working(cmd, self.now // DAY_NS)
        order_id, symbol = w.order_id, w.symbol
        reason = self._invalid(w)
        if reason:
            self._emit(OrderRejected, order_id, symbol, reason=reason)
            return
        self._ids += 1
        self._out.append(OrderAccepted(ts_event=self.now, ts_init=self.clock.now(), order_id=order_id,
                                       symbol=symbol, venue_order_id=f"{self.name}-{self._ids}"))
        self.working[order_id] = w
        book = self.books.get(symbol)
        if book is not None:
            self._match(w, book)
        if w.time_in_force in _IMMEDIATE and order_id in self.working:
            del self.working[order_id]
            self._emit(OrderCanceled, order_id, symbol, reason=f"{w.time_in_force.value}: not filled at once")

    def _invalid(self, w: _Working) -> str:
        inst = self.instruments.get(w.symbol)
        if inst is None:
            return f"UNKNOWN_SYMBOL: {w.symbol}"
        if w.quantity <= 0 or w.quantity % inst.lot_size:
            return f"INVALID_QUANTITY: {w.quantity} is not a positive multiple of lot {inst.lot_size}"
        kind, price, trigger = w.kind, w.price, w.trigger
        if kind is _LIMIT and price is None or kind is _STOP and trigger is None:
            return f"MISSING_PRICE: a {kind.value} order needs a price"
        if price is not None or trigger is not None:  # a market order has neither
            for p in (price, trigger):
                if p is not None and (p <= 0 or p % inst.tick_size):
                    return f"INVALID_PRICE: {p} is not a positive multiple of tick {inst.tick_size}"
        if kind is _MARKET and w.symbol not in self.books:
            return "NO_MARKET: no quote yet for a market order"
        return ""

    def _replace(self, cmd: ReplaceOrder) -> None:
        order_id, symbol = cmd.order_id, cmd.symbol
        w = self.working.get(order_id)
        if w is None:
            self._emit(OrderCancelRejected, order_id, symbol, reason="UNKNOWN_ORDER: not working at the venue",
                       replace=True)
            return
        filled = w.quantity - w.leaves
        qty = w.quantity if cmd.quantity is None else cmd.quantity
        inst = self.instruments[symbol]
        price = w.price if cmd.price is None else cmd.price
        trigger = w.trigger if cmd.trigger_price is None else cmd.trigger_price
        if qty <= filled or qty % inst.lot_size:
            self._emit(OrderCancelRejected, order_id, symbol, reason=f"INVALID_QUANTITY: {qty} (filled {filled})",
                       replace=True)
            return
        if any(p is not None and (p <= 0 or p % inst.tick_size) for p in (price, trigger)):
            self._emit(OrderCancelRejected, order_id, symbol,
                       reason="INVALID_PRICE: not a positive multiple of the tick", replace=True)
            return
        w.quantity, w.leaves, w.price, w.trigger = qty, qty - filled, price, trigger
        self._emit(OrderReplaced, order_id, symbol, quantity=qty, price=price, trigger_price=trigger)
        book = self.books.get(symbol)
        if book is not None:
            self._match(w, book)

    # --- matching --------------------------------------------------------------------------------

    def _update_book(self, msg: Input) -> _Book | None:
        if type(msg) is QuoteTick:
            if not 0 < msg.bid < msg.ask:
                return None
            book = self.books.get(msg.symbol)
            if book is None:
                book = self.books[msg.symbol] = _Book()
            book.bid, book.ask, book.bid_size, book.ask_size = msg.bid, msg.ask, msg.bid_size, msg.ask_size
            return book
        match msg:
            case Bar(symbol=symbol, close=close):
                book = self.books.get(symbol) or self.books.setdefault(symbol, _Book())
                if msg.price_type is not PriceType.ASK:
                    book.bid = close
                if msg.price_type is not PriceType.BID:
                    book.ask = close
                book.bid = book.bid or book.ask
                book.ask = book.ask or book.bid
                book.bid_size = book.ask_size = 0
                return book
        return None

    def _match(self, w: _Working, book: _Book) -> None:
        buy = w.side is _BUY
        kind = w.kind
        if kind is _STOP and not w.triggered:
            trigger = cast(int, w.trigger)  # a stop order has one (_invalid)
            if not (book.ask >= trigger if buy else book.bid <= trigger):
                return
            w.triggered = True
        touch = book.ask if buy else book.bid
        if kind is _LIMIT:
            limit = cast(int, w.price)  # a limit order has one (_invalid)
            if touch > limit if buy else touch < limit:
                return
        available = book.ask_size if buy else book.bid_size
        qty = w.leaves
        inst = self.instruments[w.symbol]
        if available:
            qty = min(qty, available - available % inst.lot_size)
            if qty == 0 or (qty < w.leaves and w.time_in_force is _FOK):
                return
            if buy:
                book.ask_size -= qty
            else:
                book.bid_size -= qty
        leaves = w.leaves = w.leaves - qty
        self._ids += 1
        # value * fee_bps // (10_000 * SCALE), as two floor divisions (the same, for positive divisors)
        commission = mul(times(mul(touch, qty), inst.multiplier), self.fee_bps) // 10_000
        if leaves == 0:
            del self.working[w.order_id]
        self._out.append(
            (OrderPartiallyFilled if leaves else OrderFilled)(
                ts_event=self.now, ts_init=self.clock.now(), order_id=w.order_id, symbol=w.symbol,
                side=w.side, trade_id=f"{self.name}-T{self._ids}", last_qty=qty, last_price=touch,
                leaves_qty=leaves, commission=commission, cum_qty=w.quantity - leaves,
            )
        )

    def _expire_day_orders(self, day: int) -> None:
        for order_id, w in list(self.working.items()):
            if w.time_in_force is TimeInForce.DAY and w.day < day:
                del self.working[order_id]
                self._emit(OrderExpired, order_id, w.symbol)

    def _emit(self, kind: type, order_id: str, symbol: str, **fields: object) -> None:
        self._out.append(kind(ts_event=self.now, ts_init=self.clock.now(), order_id=order_id, symbol=symbol, **fields))
