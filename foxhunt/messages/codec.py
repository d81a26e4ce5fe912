"""The one encoder and the one decoder of journaled messages: msgpack, tagged by class name."""

from __future__ import annotations

from typing import Union

import msgspec

from foxhunt.messages.base import Derived, Input, Message
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.orders import (
    CancelOrder,
    CommissionReported,
    DuplicateFillIgnored,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderDenied,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderReportRefused,
    OrderSubmitted,
    OrdersUncertain,
    ReplaceOrder,
    SubmitOrder,
)
from foxhunt.messages.system import (
    AdminCommand,
    ClockHeld,
    CommandRejected,
    ConfigReloaded,
    FeedGap,
    InstrumentStateChanged,
    JournalDegraded,
    JournalRecovered,
    MarketDataFlagged,
    PositionChanged,
    RiskLimitChanged,
    RunStarted,
    RunStopped,
    StrategyStateChanged,
    TimerFired,
    TradingStateChanged,
    VenueConnected,
    VenueDisconnected,
    VenueMessageIgnored,
    VenueMessageRejected,
    VenueSessionEvent,
)

MESSAGE_TYPES: tuple[type[Message], ...] = (
    QuoteTick,
    TradeTick,
    Bar,
    SubmitOrder,
    CancelOrder,
    ReplaceOrder,
    OrderSubmitted,
    OrderDenied,
    OrdersUncertain,
    OrderReportRefused,
    OrderAccepted,
    OrderRejected,
    OrderCanceled,
    OrderCancelRejected,
    OrderReplaced,
    OrderExpired,
    OrderPartiallyFilled,
    OrderFilled,
    CommissionReported,
    RunStarted,
    RunStopped,
    VenueConnected,
    VenueDisconnected,
    TimerFired,
    AdminCommand,
    FeedGap,
    JournalDegraded,
    JournalRecovered,
    TradingStateChanged,
    MarketDataFlagged,
    PositionChanged,
    RiskLimitChanged,
    CommandRejected,
    InstrumentStateChanged,
    ConfigReloaded,
    StrategyStateChanged,
    VenueSessionEvent,
    VenueMessageIgnored,
    DuplicateFillIgnored,
    VenueMessageRejected,
    ClockHeld,
)
AnyMessage = Union[MESSAGE_TYPES]  # noqa: UP007 - a runtime union of the tuple above
INPUT_KINDS = frozenset(t.__name__ for t in MESSAGE_TYPES if issubclass(t, Input))
DERIVED_KINDS = frozenset(t.__name__ for t in MESSAGE_TYPES if issubclass(t, Derived))
VENUE_REPORT_KINDS = frozenset(
    t.__name__ for t in MESSAGE_TYPES if t.__module__.endswith(".orders") and issubclass(t, Input)
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyMessage)

encode = _encoder.encode
decode = _decoder.decode

