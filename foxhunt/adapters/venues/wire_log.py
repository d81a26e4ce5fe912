"""A venue wrapper that appends every command it is handed to a file, one JSON line each, before the
venue sees it: the record of what went out on the wire, for audits and for the crash tests that check no
order ever reached a venue that the journal lacks. Lines are written unbuffered, so a killed process
loses none of them."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec

from foxhunt.messages.base import Input
from foxhunt.messages.orders import CancelOrder, ReplaceOrder, SubmitOrder
from foxhunt.ports import Venue


class WireLoggedVenue:
    def __init__(self, venue: Venue, path: Path) -> None:
        self.venue = venue
        self.name = venue.name
        self.keeps_orders = venue.keeps_orders
        self._file = Path(path).open("ab", buffering=0)
        self._encode = msgspec.json.Encoder().encode

    def connect(self) -> list[Input]:
        return self.venue.connect()

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> list[Input]:
        self._file.write(self._encode(cmd) + b"\n")
        return self.venue.send(cmd)

    def on_market(self, msg: Input) -> list[Input]:
        return self.venue.on_market(msg)

    async def run(self, publish, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        await self.venue.run(publish, task_status=task_status)

    def __enter__(self) -> WireLoggedVenue:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()
