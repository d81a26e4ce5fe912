"""The pre-trade gate every order command passes before it can reach a venue.

This is the spine's placeholder: trading state, reduce-only and a maximum order size. The risk engine
(numba kernels over arrays, the full control set) replaces `PreTradeGate` behind the same two methods.
A denial is a value (`Denial`), never an exception; the kernel turns it into an `OrderDenied` event.
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

import msgspec

from foxhunt.core.fixed import nanos
from foxhunt.messages.base import format_fixed
from foxhunt.messages.orders import ReplaceOrder, Side, SubmitOrder
from foxhunt.messages.system import TradingState


class RiskLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    max_order_qty: Decimal = Decimal("10000000")


class Denial(NamedTuple):
    reason: str
    detail: str


def _reduces(side: Side, qty: int, position: int) -> bool:
    signed = qty if side is Side.BUY else -qty
    return position != 0 and (position > 0) != (signed > 0) and abs(signed) <= abs(position)


class PreTradeGate:
    def __init__(self, limits: RiskLimits) -> None:
        self.limits = limits
        self.max_order_qty = nanos(limits.max_order_qty)

    def check_submit(self, cmd: SubmitOrder, position: int, state: TradingState) -> Denial | None:
        if state is TradingState.HALTED:
            return Denial("TRADING_HALTED", "state=HALTED")
        reduces = _reduces(cmd.side, cmd.quantity, position)
        if state is TradingState.REDUCING and not reduces:
            return Denial("TRADING_REDUCING", f"state=REDUCING position={format_fixed(position)}")
        if cmd.reduce_only and not reduces:
            return Denial("REDUCE_ONLY", f"position={format_fixed(position)}")
        return self._check_size(cmd.quantity)

    def check_replace(self, cmd: ReplaceOrder, state: TradingState) -> Denial | None:
        if state is TradingState.HALTED:
            return Denial("TRADING_HALTED", "state=HALTED")
        return None if cmd.quantity is None else self._check_size(cmd.quantity)

    def _check_size(self, qty: int) -> Denial | None:
        if qty > self.max_order_qty:
            return Denial(
                "MAX_ORDER_QTY", f"qty={format_fixed(qty)} limit={format_fixed(self.max_order_qty)}"
            )
        return None
