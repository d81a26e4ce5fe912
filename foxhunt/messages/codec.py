"""The one encoder and the one decoder of journaled messages: msgpack, tagged by class name. It knows every
message type from the registry the types enter as they are declared (messages/base.py)."""

from __future__ import annotations

from typing import Union

import msgspec

from foxhunt.messages import market, orders, scores, system  # noqa: F401 - their message types register themselves
from foxhunt.messages.base import REGISTRY, Derived, Input, Message

MESSAGE_TYPES: tuple[type[Message], ...] = tuple(REGISTRY)  # every message type (messages/base.py, REGISTRY)
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

