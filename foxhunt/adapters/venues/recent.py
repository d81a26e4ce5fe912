"""The ids a venue adapter must remember for a while, and only for a while."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from foxhunt.messages.orders import CLOSED_KEPT

# More than the closed orders the kernel remembers (messages/orders.py, CLOSED_KEPT): a report for an order the
# kernel forgot is ignored for that reason before an adapter looks here.
KEPT = 100_000


class RecentSet:
    """The `kept` members added last (executions already published, orders already done): a repeated
    report arrives soon after the first, and a daemon that runs for months must not remember every id.
    `forget` is called with each member that goes."""

    def __init__(self, kept: int = KEPT, forget: Callable[[Any], object] | None = None) -> None:
        self.kept = kept
        self.forget = forget
        self._members: set[Hashable] = set()
        self._order: deque[Hashable] = deque()

    def add(self, member: Hashable) -> None:
        if member in self._members:
            return
        self._members.add(member)
        self._order.append(member)
        if len(self._order) > self.kept:
            gone = self._order.popleft()
            self._members.discard(gone)
            if self.forget is not None:
                self.forget(gone)

    def discard(self, member: Hashable) -> None:
        """No longer a member (its place in the order goes when its turn comes)."""
        self._members.discard(member)

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
        self._kept = RecentSet(CLOSED_KEPT, forget=lambda order_id: per_order.pop(order_id, None))

    def add(self, order_id: str) -> None:
        self.ids.add(order_id)
        self._kept.add(order_id)

    def __contains__(self, order_id: object) -> bool:
        return order_id in self.ids
