"""The end-of-run summary of a kernel: what `foxhunt run` and `foxhunt replay` print."""

from __future__ import annotations

from foxhunt.core.kernel import Kernel
from foxhunt.messages.base import format_fixed


def money_by_currency(kernel: Kernel) -> dict[str, dict[str, int]]:
    """Realised, unrealised PnL and commissions (nanos) per currency, currencies in sorted order."""
    by_currency: dict[str, dict[str, int]] = {}
    for pos in kernel.portfolio.positions.values():
        money = by_currency.setdefault(pos.currency, {"realized": 0, "unrealized": 0, "commissions": 0})
        money["realized"] += pos.realized_pnl
        money["unrealized"] += pos.unrealized_pnl
        money["commissions"] += pos.commissions
    return dict(sorted(by_currency.items()))


def summarize(kernel: Kernel, *, events: int, seconds: float, **extra: object) -> dict[str, object]:
    positions = kernel.portfolio.positions.values()
    by_currency = money_by_currency(kernel)
    return {
        **extra,
        "events": events,
        "orders": kernel.orders.count,
        "denied": kernel.orders.denied,
        "denials_held_back": kernel.repeats.held_back,  # denied, and not journaled: repeats inside a window
        "fills": sum(p.fills for p in positions),
        "positions": {p.symbol: format_fixed(p.quantity) for p in positions},
        "pnl": {
            ccy: format_fixed(m["realized"] + m["unrealized"] - m["commissions"]) for ccy, m in sorted(by_currency.items())
        },
        "realized_pnl": {ccy: format_fixed(m["realized"]) for ccy, m in sorted(by_currency.items())},
        "commissions": {ccy: format_fixed(m["commissions"]) for ccy, m in sorted(by_currency.items())},
        "max_drawdown": format_fixed(kernel.portfolio.max_drawdown),
        "trading_state": kernel.state.value,
        "state_digest": kernel.state_digest(),
        "seconds": round(seconds, 3),
        "events_per_second": round(events / seconds) if seconds > 0 else None,
    }
