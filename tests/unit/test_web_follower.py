"""The web gateway's shared read of a journal (web/journals.py, Follower), over the in-memory journal: a
consumer far behind catches up with its own reads, then takes what the follower keeps, with no gap and no
repeat, while the follower trims what it keeps and the journal grows."""

from __future__ import annotations

from contextlib import aclosing

import anyio
import msgspec

from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.web import journals
from foxhunt.web.journals import Follower
from tests.fakes import quote

META = {"config": b"{}", "config_digest": "d", "fingerprint": {}}


async def test_a_consumer_behind_catches_up_then_follows_from_memory(monkeypatch):
    monkeypatch.setattr(journals, "KEEP", 5)  # so that it trims while the consumer reads
    store = MemoryJournalStore(page_size=4)
    async with store.writer("j", **META) as writer:
        for i in range(30):
            writer.append(quote(i + 1, "1.1", "1.1002"))
        await writer.flush()
        follower = Follower("j", 31)
        seen: list[int] = []
        encoded: list[bytes | None] = []

        async def consume() -> None:
            async with aclosing(follower.follow(store, 1)) as pages:
                async for page in pages:
                    seen.extend(r.seq for r, _, _ in page)
                    encoded.extend(data for _, _, data in page)
                    if seen[-1] == 60:
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run, store)
            tg.start_soon(consume)
            for i in range(30, 60):
                writer.append(quote(i + 1, "1.1", "1.1002"))
                await writer.flush()
                await anyio.sleep(0.001)
            with anyio.fail_after(10):
                while not seen or seen[-1] < 60:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert seen == list(range(1, 61))
    assert len(follower.kept) <= 5 and follower.first_kept == 61 - len(follower.kept)
    assert encoded[0] is None  # read by the consumer itself
    kept = [msgspec.json.decode(data) for data in encoded if data is not None]
    assert kept and kept[-1]["seq"] == 60 and kept[-1]["kind"] == "QuoteTick" and kept[-1]["event"]["bid"] > 0
    assert follower.since(1) is None and follower.since(61) == []
