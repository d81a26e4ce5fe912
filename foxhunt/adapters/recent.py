"""The ids a venue adapter must remember for a while, and only for a while."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any

from foxhunt.core.orders import CLOSED_KEPT

# More than the closed orders the kernel remembers (core/orders.py, CLOSED_KEPT): a report for an order the
# kernel forgot is ignored for that reason before an adapter looks here.
KEPT = 100_000


class RecentSet:
    """The `kept` members added last (executions already published, orders already done): a repeated
    report arrives soon after the first, and a daemon that runs for months must not remember every id."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._members: set[Hashable] = set()
        self._order: deque[Hashable] = deque()

    def add(self, member: Hashable) -> None:
        if member in self._members:
            return
        self._members.add(member)
        self._order.append(member)
        if len(self._order) > self.kept:
            self._members.discard(self._order.popleft())

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)


class DoneOrders:
    """The orders whose last report an adapter has published. What the adapter keeps per order (`per_order`:
    the ClOrdID the venue knows it by, ib_async's Trade) stays while the kernel may still ask to cancel a
    done order (a cancel racing its end, which the venue answers), which is while the kernel remembers it."""

    def __init__(self, per_order: dict[str, Any]) -> None:
        self.ids = RecentSet()
        self._per_order = per_order
        self._done: deque[str] = deque()

    def add(self, order_id: str) -> None:
        if order_id in self.ids:
            return
        self.ids.add(order_id)
        self._done.append(order_id)
        if len(self._done) > CLOSED_KEPT:
            self._per_order.pop(self._done.popleft(), None)

    def __contains__(self, order_id: object) -> bool:
        return order_id in self.ids
