"""Operators' commands and configuration reloads, applied by the kernel where they stand in the stream.

Every command carries its operator's uid and user name and a reason, and everything it changes is a
derived event naming them; a command that cannot apply (a wrong argument, an unknown order, strategy or
instrument) changes nothing and is recorded as a `CommandRejected`. Replay meets the same inputs at the
same sequence numbers and does the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from foxhunt.core.effects import Effects, KernelView
from foxhunt.core.orders import Order
from foxhunt.core.risk.breakers import Breakers
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.trading_state import Cause
from foxhunt.messages.orders import OrderType, Side, SubmitOrder, TimeInForce
from foxhunt.messages.system import (
    AdminCommand,
    CommandRejected,
    ConfigReloaded,
    RiskLimitChanged,
    StrategyStateChanged,
    TradingState,
)

ADMIN_COMMANDS = ("halt", "reduce", "resume", "kill", "flatten", "cancel", "limit", "strategy")


class OperatorError(Exception):
    """A command the kernel does not know: the admin layer validates commands, so this is a bug."""


class Operated(KernelView, Effects, Protocol):
    """The kernel as an operator's commands reach it: what they read and do, and the strategies and limits
    they steer."""

    @property
    def gate(self) -> PreTradeGate: ...
    @property
    def contexts(self) -> Mapping[str, object]: ...  # the strategies by name
    @property
    def paused(self) -> set[str]: ...

    def set_paused(self, strategy_id: str, paused: bool) -> None: ...
    def follow_limits(self) -> None: ...


class Operator:
    def __init__(self, kernel: Operated, breakers: Breakers) -> None:
        self.kernel = kernel
        self.breakers = breakers

    def on_admin(self, cmd: AdminCommand) -> None:
        match cmd.command:
            case "halt":
                self._set_state(TradingState.HALTED, cmd)
            case "reduce":
                self._set_state(TradingState.REDUCING, cmd)
            case "resume":
                self.breakers.acknowledged()
                self._set_state(TradingState.ACTIVE, cmd)
            case "kill":
                self.kernel.change_trading(Cause.KILL, cmd, _state_text(cmd), cancel_reason=_cancel_text(cmd))
            case "flatten":
                self._flatten(cmd)
            case "cancel":
                self._cancel_orders(cmd)
            case "limit":
                self._set_limit(cmd)
            case "strategy":
                self._pause_strategy(cmd)
            case _:
                raise OperatorError(f"unknown admin command {cmd.command!r}; known: {', '.join(ADMIN_COMMANDS)}")

    def _reject(self, cmd: AdminCommand, reason: str) -> None:
        """A command that cannot apply changes nothing and is recorded as rejected, with why."""
        k = self.kernel
        text = " ".join([cmd.command, *cmd.args])
        k.emit(CommandRejected(ts_event=cmd.ts_event, ts_init=cmd.ts_init, command=text, reason=reason))

    def _set_limit(self, cmd: AdminCommand) -> None:
        """`limit set NAME VALUE`: a risk limit changes where the command stands in the journal, so replay
        changes it at the same point."""
        k = self.kernel
        if len(cmd.args) != 3 or cmd.args[0] != "set":
            return self._reject(cmd, "usage: limit set NAME VALUE")
        try:
            previous, value = k.gate.set_limit(cmd.args[1], cmd.args[2])
        except ValueError as e:
            return self._reject(cmd, str(e))
        k.follow_limits()
        k.emit(
            RiskLimitChanged(ts_event=cmd.ts_event, ts_init=cmd.ts_init, name=cmd.args[1], previous=previous,
                             value=value, cause=f"admin limit by {_operator(cmd)}: {cmd.reason}")
        )

    def _cancel_orders(self, cmd: AdminCommand) -> None:
        k = self.kernel
        if cmd.args == ["all"]:
            return self._cancel_all(cmd)
        unknown = [order_id for order_id in cmd.args if order_id not in k.orders.by_id]
        if not cmd.args or unknown:
            return self._reject(cmd, f"no such order: {', '.join(unknown)}" if unknown else "usage: cancel ORDER...|all")
        for order_id in cmd.args:
            self._request_cancel(k.orders.get(order_id), cmd)

    def _flatten(self, cmd: AdminCommand) -> None:
        """`flatten [SYMBOL]`: cancel the working orders of the instrument (of all, without a symbol) and
        close its position with a reduce-only market order. The orders pass the pre-trade gate like any
        other: in HALTED they are denied, so an operator who wants out moves to REDUCING first."""
        k = self.kernel
        if len(cmd.args) > 1 or (cmd.args and cmd.args[0] not in k.instruments):
            return self._reject(cmd, f"no such instrument: {cmd.args[0]}" if cmd.args else "usage: flatten [SYMBOL]")
        symbols = cmd.args or sorted(k.instruments)
        for order in list(k.orders.open.values()):
            if order.symbol in symbols:
                self._request_cancel(order, cmd)
        for symbol in symbols:
            pos = k.portfolio.positions.get(symbol)
            if pos is None or pos.quantity == 0:
                continue
            k.request(
                SubmitOrder(
                    ts_event=cmd.ts_event, ts_init=cmd.ts_init, order_id=k.next_order_id("admin"),
                    strategy_id="admin", symbol=symbol, side=Side.SELL if pos.quantity > 0 else Side.BUY,
                    order_type=OrderType.MARKET, quantity=abs(pos.quantity), time_in_force=TimeInForce.IOC,
                    reduce_only=True,
                )
            )

    def _pause_strategy(self, cmd: AdminCommand) -> None:
        """`strategy pause|resume NAME`: a paused strategy is not called for market data or timers (so it
        asks for nothing); its working orders stay, and it still hears about them."""
        k = self.kernel
        if len(cmd.args) != 2 or cmd.args[0] not in ("pause", "resume"):
            return self._reject(cmd, "usage: strategy pause|resume NAME")
        action, name = cmd.args
        if name not in k.contexts:
            return self._reject(cmd, f"no strategy named {name!r}; running: {', '.join(k.contexts) or 'none'}")
        pause = action == "pause"
        if pause == (name in k.paused):
            return self._reject(cmd, f"strategy {name} is already {'paused' if pause else 'running'}")
        k.set_paused(name, pause)
        k.emit(
            StrategyStateChanged(ts_event=cmd.ts_event, ts_init=cmd.ts_init, strategy_id=name, paused=pause,
                                 cause=f"admin strategy {action} by {_operator(cmd)}: {cmd.reason}")
        )

    def on_config_reloaded(self, msg: ConfigReloaded) -> None:
        """The risk limits of a reloaded configuration take effect here, live and in replay alike."""
        k = self.kernel
        limits = msgspec.json.decode(msg.risk, type=RiskLimits)
        before = k.gate.limits
        if limits != before:
            k.gate.configure(limits)
            k.follow_limits()
        for name in msg.changed:
            k.emit(
                RiskLimitChanged(ts_event=msg.ts_event, ts_init=msg.ts_init, name=name,
                                 previous=_limit_text(before, name), value=_limit_text(limits, name),
                                 cause=f"configuration reloaded from {msg.source}")
            )

    def _cancel_all(self, cmd: AdminCommand) -> None:
        k = self.kernel
        for order in list(k.orders.open.values()):
            self._request_cancel(order, cmd)

    def _request_cancel(self, order: Order, cmd: AdminCommand) -> None:
        self.kernel.request_cancel(order, cmd, _cancel_text(cmd))

    def _set_state(self, state: TradingState, cmd: AdminCommand) -> None:
        self.kernel.change_trading(Cause.OPERATOR, cmd, _state_text(cmd), state)


def _operator(cmd: AdminCommand) -> str:
    return cmd.operator or f"uid {cmd.operator_uid}"


def _state_text(cmd: AdminCommand) -> str:
    return f"admin {cmd.command} by {_operator(cmd)}: {cmd.reason}"


def _cancel_text(cmd: AdminCommand) -> str:
    return f"admin {cmd.command} by {_operator(cmd)}"


def _limit_text(limits: RiskLimits, name: str) -> str:
    node = msgspec.to_builtins(limits)
    for key in name.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return "off" if node is None else str(node)
