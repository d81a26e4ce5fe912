"""What every venue on the other end of a connection (FIX, Interactive Brokers) has in common."""

from __future__ import annotations

import time

from foxhunt.messages.base import Input
from foxhunt.messages.system import VenueDisconnected


class RemoteVenue:
    """Reports arrive later, from `run`; working orders outlive foxhunt and are reconciled after each
    connection; the venue is down until its session is up and reconciled (then `run` publishes
    VenueConnected), so the kernel holds orders for it meanwhile."""

    name: str
    keeps_orders = True

    def connect(self) -> list[Input]:
        now = time.time_ns()
        return [VenueDisconnected(ts_event=now, ts_init=now, venue=self.name, reason="connecting")]

    def on_market(self, msg: Input) -> list[Input]:
        return []  # a real venue matches against its own book, not foxhunt's market data
