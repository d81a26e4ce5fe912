"""An in-memory journal store for unit tests: the same contract as PostgreSQL, no durability."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from foxhunt.errors import JournalLocked, JournalNotFound
from foxhunt.messages import codec
from foxhunt.messages.base import Message
from foxhunt.ports import PAGE_SIZE, JournalInfo, JournalStore, JournalWriter, Record, Snapshot


class _Journal:
    def __init__(self, journal_id: int, config_digest: str) -> None:
        self.journal_id = journal_id
        self.config_digest = config_digest
        self.created_at = datetime.datetime.now(datetime.UTC).isoformat()
        self.records: list[Record] = []
        self.snapshots: dict[int, Snapshot] = {}
        self.held = False
        self.changed = anyio.Event()


class MemoryJournalWriter(JournalWriter):
    def __init__(self, name: str, journal: _Journal) -> None:
        self.name = name
        self._journal = journal
        self._flushed = len(journal.records)  # like PostgreSQL's writer: committed at flush, then followers wake

    @property
    def last_seq(self) -> int:
        return len(self._journal.records)

    @property
    def committed_seq(self) -> int:
        return self._flushed

    def append(self, message: Message, causation: int | None = None) -> int:
        seq = len(self._journal.records) + 1
        payload = codec.encode(message)
        self._journal.records.append(Record(seq, causation, codec.decode(payload), payload))
        return seq

    def append_input(self, record: Record) -> int:
        """An input read from another journal, appended as it was read: its payload kept and its message (decoded
        from that payload by the reader, so this journal's own copy) taken as it is, without `append`'s encoding and
        decoding again (a sweep's worker copies whole journals into memory this way)."""
        seq = len(self._journal.records) + 1
        self._journal.records.append(Record(seq, None, record.message, record.payload))
        return seq

    async def flush(self) -> None:
        self._flushed = len(self._journal.records)
        changed, self._journal.changed = self._journal.changed, anyio.Event()
        changed.set()


class MemoryJournalStore(JournalStore):
    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        self._journals: dict[str, _Journal] = {}
        self.page_size = page_size

    @asynccontextmanager
    async def writer(self, name: str, *, config: bytes, config_digest: str, fingerprint: dict[str, str]):
        journal = self._journals.get(name)
        if journal is None:
            journal = self._journals[name] = _Journal(len(self._journals) + 1, config_digest)
        if journal.held:
            raise JournalLocked(f"journal {name!r} is held by another writer in this process")
        journal.held = True
        writer = MemoryJournalWriter(name, journal)
        try:
            yield writer
        finally:
            await writer.flush()
            journal.held = False

    def adopt(self, other: MemoryJournalStore, name: str) -> None:
        """Read journal `name` of `other` as one of this store's (the same records, shared, not copied): a
        sweep's worker keeps each journal once and puts the ones a point reads into one store."""
        self._journals[name] = other._get(name)

    def _get(self, name: str) -> _Journal:
        try:
            return self._journals[name]
        except KeyError:
            raise JournalNotFound(f"no journal named {name!r}") from None

    async def info(self, name: str) -> JournalInfo:
        j = self._get(name)
        n = len(j.records)
        return JournalInfo(name, j.journal_id, j.created_at, j.config_digest, n, n)

    async def list(self) -> list[JournalInfo]:
        return [await self.info(name) for name in sorted(self._journals)]

    async def read(
        self, name: str, from_seq: int = 1, limit: int | None = None, *, decode_derived: bool = True
    ) -> AsyncIterator[list[Record]]:
        records = self._get(name).records
        end = len(records) if limit is None else min(len(records), from_seq - 1 + limit)
        for start in range(max(from_seq, 1) - 1, end, self.page_size):
            yield records[start : min(start + self.page_size, end)]

    async def tail(self, name: str, from_seq: int = 1, *, decode_derived: bool = True) -> AsyncIterator[list[Record]]:
        journal = self._get(name)
        seq = max(from_seq, 1)
        while True:
            changed = journal.changed
            if seq <= len(journal.records):
                page = journal.records[seq - 1 : seq - 1 + self.page_size]
                seq += len(page)
                yield page
                continue
            await changed.wait()

    async def snapshots(self, name: str) -> list[Snapshot]:
        return [snap for _, snap in sorted(self._get(name).snapshots.items(), reverse=True)]

    async def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        kept = self._get(name).snapshots
        kept[snapshot.seq] = snapshot
        for seq in sorted(kept, reverse=True)[keep:]:
            del kept[seq]
