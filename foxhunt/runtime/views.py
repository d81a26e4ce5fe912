"""What an operator reads of a kernel's state, as plain JSON-ready values: positions, orders, PnL, risk.

The admin socket answers its queries with these from the daemon's own kernel (runtime/console.py); the
web gateway answers with them from a kernel it rebuilt from the journal (foxhunt/web/views.py), so both
show the same thing in the same shape. Prices and quantities are fixed-point integers shown as decimal
strings, exactly (messages/base.py, format_fixed).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import msgspec

from foxhunt.core.kernel import Kernel
from foxhunt.core.orders import Order
from foxhunt.messages.base import format_fixed
from foxhunt.runtime.summary import money_by_currency


def positions(kernel: Kernel) -> list[dict[str, Any]]:
    return [
        {"symbol": p.symbol, "quantity": format_fixed(p.quantity), "avg_price": format_fixed(p.avg_price),
         "mark": format_fixed(p.mark), "unrealized_pnl": format_fixed(p.unrealized_pnl),
         "realized_pnl": format_fixed(p.realized_pnl), "commissions": format_fixed(p.commissions),
         "currency": p.currency, "fills": p.fills}
        for _, p in sorted(kernel.portfolio.positions.items())
        if p.quantity or p.fills
    ]


def orders(kernel: Kernel, only_open: bool, count: int) -> list[dict[str, Any]]:
    orders = kernel.orders.open if only_open else kernel.orders.by_id
    return [_order(o) for o in reversed(list(islice(reversed(orders.values()), count)))]


def pnl(kernel: Kernel) -> dict[str, Any]:
    portfolio = kernel.portfolio
    money = money_by_currency(kernel)
    return {
        "by_currency": {
            ccy: {"realized": format_fixed(m["realized"]), "unrealized": format_fixed(m["unrealized"]),
                  "commissions": format_fixed(m["commissions"]),
                  "net": format_fixed(m["realized"] + m["unrealized"] - m["commissions"])}
            for ccy, m in money.items()
        },
        "equity": format_fixed(portfolio.equity),
        "peak_equity": format_fixed(portfolio.peak_equity),
        "max_drawdown": format_fixed(portfolio.max_drawdown),
    }


def risk(kernel: Kernel) -> dict[str, Any]:
    gate, breakers = kernel.gate, kernel.safeguards.breakers
    return {
        "trading_state": kernel.state.value,
        "limits": msgspec.to_builtins(gate.limits),
        "usage": {
            "open_orders": len(kernel.orders.open),
            "working": {s: {"buy_qty": format_fixed(w[0]), "sell_qty": format_fixed(w[1]), "orders": w[2]}
                        for s, w in gate.working_orders().items()},
            "gross_exposure": format_fixed(kernel.portfolio.gross_exposure) if kernel.portfolio.track_gross else None,
            "net_exposure": format_fixed(kernel.portfolio.net_exposure),
        },
        "breakers": {
            "loss_breakers_armed": breakers.armed,
            "day_start_equity": format_fixed(breakers.day_start_equity),
            "max_daily_loss": _money(breakers.max_daily_loss),
            "max_drawdown": _money(breakers.max_drawdown),
            "action": breakers.action.value,
            "market_wide_levels_tripped": kernel.safeguards.market_wide.tripped,
        },
        "paused_instruments": sorted(gate.paused_instruments()),
        "paused_strategies": sorted(kernel.paused),
        **held_back(kernel),
    }


def held_back(kernel: Kernel) -> dict[str, Any]:
    """The denials the kernel counted and did not journal (core/risk/repeats.py): since the journal began,
    and in the windows open now, which a DenialsRepeated will summarise when they close."""
    return {
        "denials_held_back": kernel.repeats.held_back,
        "denial_windows": [
            {"strategy": key[0], "symbol": key[1], "request": key[2], "side": key[3], "reason": key[4],
             "repeats": w.repeats, "first_order_id": w.first_order_id,
             "closes_in_ms": max(0, (w.ends_ns - kernel.now_ns) // 1_000_000)}
            for key, w in sorted(kernel.repeats.open.items())
        ],
    }


def _order(o: Order) -> dict[str, Any]:
    return {
        "order_id": o.order_id, "strategy": o.strategy_id, "symbol": o.symbol, "side": o.side.value,
        "type": o.order_type.value, "quantity": format_fixed(o.quantity), "filled": format_fixed(o.filled_qty),
        "price": None if o.price is None else format_fixed(o.price), "status": o.status.value,
        "uncertain": o.uncertain,
    }


def _money(value: int | None) -> str | None:
    return None if value is None else format_fixed(value)
