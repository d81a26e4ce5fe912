"""Instruments and market data."""

from __future__ import annotations

import msgspec

from foxhunt.messages.base import Enum, Input


class Instrument(msgspec.Struct, frozen=True, kw_only=True):
    """A tradable thing. Prices must be multiples of `tick_size`, quantities of `lot_size` (both nanos).
    An execution's price must be a multiple of `execution_tick`, where a market lets executions be finer
    than orders (0: `tick_size`)."""

    symbol: str
    tick_size: int
    lot_size: int
    currency: str
    multiplier: int = 1
    execution_tick: int = 0


class PriceType(Enum):
    BID = "BID"
    ASK = "ASK"
    MID = "MID"
    LAST = "LAST"


class AggressorSide(Enum):
    BUYER = "BUYER"
    SELLER = "SELLER"
    NONE = "NONE"


class QuoteTick(Input, frozen=True, kw_only=True):
    """Top of book. Sizes of 0 mean the feed does not publish sizes (fills are then not size-limited)."""

    symbol: str
    bid: int
    ask: int
    bid_size: int = 0
    ask_size: int = 0


class TradeTick(Input, frozen=True, kw_only=True):
    symbol: str
    price: int
    size: int
    aggressor: AggressorSide = AggressorSide.NONE
    trade_id: str = ""


class Bar(Input, frozen=True, kw_only=True):
    """An OHLC bar; `ts_event` is the bar's close, when its values became known."""

    symbol: str
    price_type: PriceType
    interval_ns: int
    open: int
    high: int
    low: int
    close: int
    volume: int = 0


MarketData = QuoteTick | TradeTick | Bar
MARKET_DATA_TYPES = frozenset({QuoteTick, TradeTick, Bar})  # `type(msg) in MARKET_DATA_TYPES`: one hash lookup
