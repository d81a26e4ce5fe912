"""The journals' HTML reports (runtime/report.py) as the gateway serves them: made off its event loop,
bounded per user and in all, kept a while.

A report reads a whole journal through a kernel: seconds of CPU on a long one. Made on the event loop, it
held every other request up for as long (a read token could stall the gateway). Here each is made in a
worker thread, on an event loop and a journal store of its own, so the gateway's loop only waits for the
thread's answer. A user makes one report at a time (a second asked meanwhile is refused, 429), at most
`workers` are made at once, and two users asking for the same journal share one making. A report made
less than `max_age` seconds ago is served as it is, journal grown or not: a growing journal would
otherwise never hit the cache. The page says which sequence number it covers (header X-Report-Seq).
"""

from __future__ import annotations

import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from foxhunt.ports import JournalStore


class ReportBusy(Exception):
    """This user already has a report being made."""


@dataclass(frozen=True)
class Page:
    html: bytes
    seq: int  # the journal's last sequence number when the report was made
    made_at: float  # on the reports' clock


class Reports:
    def __init__(self, open_store: Callable[[], JournalStore], *, workers: int = 2, max_age: float = 30.0,
                 keep: int = 8, clock: Callable[[], float] = time.monotonic) -> None:
        self.open_store = open_store  # a store for a worker thread's own event loop (psycopg binds to its loop)
        self.max_age = max_age
        self.keep = keep
        self.clock = clock
        self.limiter = anyio.CapacityLimiter(workers)
        self.pages: OrderedDict[str, Page] = OrderedDict()
        self.making: dict[str, anyio.Event] = {}
        self.busy: set[int] = set()  # the token ids with a report being made for them

    async def page(self, name: str, last_seq: int, token_id: int) -> Page:
        """The report of journal `name`, whose last sequence number is now `last_seq`."""
        while True:
            kept = self.pages.get(name)
            if kept is not None and (kept.seq == last_seq or self.clock() - kept.made_at < self.max_age):
                self.pages.move_to_end(name)
                return kept
            making = self.making.get(name)
            if making is None:
                break
            await making.wait()  # someone else's making of it: shared
            if name in self.pages:
                return self.pages[name]
        if token_id in self.busy:
            raise ReportBusy("a report you asked for is still being made; one at a time")
        self.busy.add(token_id)
        self.making[name] = done = anyio.Event()
        try:
            # not abandoned when its request goes: a thread left running would slip past the limit
            html = await anyio.to_thread.run_sync(self._make, name, limiter=self.limiter)
            page = Page(html, last_seq, self.clock())
            self.pages[name] = page
            self.pages.move_to_end(name)
            while len(self.pages) > self.keep:
                self.pages.popitem(last=False)
            return page
        finally:
            self.busy.discard(token_id)
            del self.making[name]
            done.set()

    def _make(self, name: str) -> bytes:
        from foxhunt.runtime.report import write_report

        async def make() -> bytes:
            with tempfile.TemporaryDirectory(prefix="foxhunt-web-") as tmp:
                out = Path(tmp) / "report.html"
                await write_report(self.open_store(), [name], out)
                return out.read_bytes()

        return anyio.run(make)
