"""One contract, every journal implementation: in-memory and PostgreSQL alike."""

from __future__ import annotations

from contextlib import aclosing

import anyio
import psycopg
import pytest

from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.adapters.journal.pg_writer import RELIEVE_EVERY, PostgresJournalWriter, WriterPolicy, group_cut
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.errors import JournalLocked, JournalNotFound, JournalUnavailable
from foxhunt.messages import codec
from foxhunt.messages.orders import OrderSubmitted
from foxhunt.ports import Snapshot
from tests.fakes import quote

META = dict(config=b'{"seed": 1}', config_digest="digest-a", fingerprint={"python": "3"})


@pytest.fixture(params=["memory", "postgres"])
def store(request):
    # small pages, batches and queue, so the tests cross page and batch boundaries and hit back-pressure
    if request.param == "memory":
        return MemoryJournalStore(page_size=4)
    dsn = request.getfixturevalue("pg_dsn")
    return PostgresJournalStore(dsn, WriterPolicy(batch_max=7, queue_max=20), page_size=4)


async def collect(pages) -> list:
    async with aclosing(pages) as it:
        return [record async for page in it for record in page]


async def append_quotes(writer, n: int, start_ts: int = 1) -> list[int]:
    seqs = []
    for i in range(n):
        if writer.backlogged:
            await writer.relieve()
        seq = writer.append(quote(start_ts + i, "1.1", "1.1002"))
        seqs.append(seq)
        seqs.append(writer.append(OrderSubmitted(ts_event=i, ts_init=i, order_id=f"o{i}", symbol="X"), seq))
    return seqs


async def test_sequence_numbers_are_gap_free_and_reads_return_everything_in_order(store, journal_name):
    async with store.writer(journal_name, **META) as writer:
        assert writer.last_seq == 0
        seqs = await append_quotes(writer, 25)
        await writer.flush()
    assert seqs == list(range(1, 51))
    records = await collect(store.read(journal_name))
    assert [r.seq for r in records] == seqs
    assert [r.causation for r in records[:4]] == [None, 1, None, 3]
    assert records[0].message == quote(1, "1.1", "1.1002")
    assert all(codec.encode(r.message) == r.payload for r in records)


async def test_read_from_a_position_with_a_limit(store, journal_name):
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 10)
    assert [r.seq for r in await collect(store.read(journal_name, 5, 3))] == [5, 6, 7]
    assert [r.seq for r in await collect(store.read(journal_name, 19))] == [19, 20]
    assert await collect(store.read(journal_name, 21)) == []


async def test_a_reopened_journal_continues_its_numbering(store, journal_name):
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 3)
    async with store.writer(journal_name, **META) as writer:
        assert writer.last_seq == 6
        assert writer.append(quote(99, "1.1", "1.2")) == 7
    info = await store.info(journal_name)
    assert (info.name, info.last_seq, info.config_digest) == (journal_name, 7, "digest-a")
    assert journal_name in [i.name for i in await store.list()]


@pytest.mark.faults
async def test_a_second_writer_is_refused_while_the_first_holds_the_journal(store, journal_name):
    async with store.writer(journal_name, **META):
        with pytest.raises(JournalLocked, match="held by another writer"):
            async with store.writer(journal_name, **META):
                pass
    async with store.writer(journal_name, **META):  # released on exit
        pass


async def test_a_journal_keeps_the_configuration_of_its_first_writer(store, journal_name):
    # which later configurations a journal can take is the runtime's decision (runtime/daemon.py); the
    # store records the first, which replay builds its kernel from
    async with store.writer(journal_name, **META):
        pass
    async with store.writer(journal_name, **{**META, "config_digest": "digest-b"}):
        pass
    assert (await store.info(journal_name)).config_digest == META["config_digest"]


async def test_unknown_journal_is_named_in_the_error(store):
    with pytest.raises(JournalNotFound, match="'no-such-journal'"):
        await store.info("no-such-journal")
    with pytest.raises(JournalNotFound):
        await collect(store.read("no-such-journal"))


async def test_tail_follows_new_records_as_they_are_committed(store, journal_name):
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 2)
        await writer.flush()
        seen = []

        async def follow():
            async with aclosing(store.tail(journal_name, 3)) as pages:
                async for page in pages:
                    seen.extend(record.seq for record in page)
                    if seen[-1] == 8:
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await anyio.sleep(0.05)
            await append_quotes(writer, 2)
            await writer.flush()
    assert seen == [3, 4, 5, 6, 7, 8]


async def test_reading_and_tailing_without_decoding_derived_events_keep_inputs_and_payloads(store, journal_name):
    """decode_derived=False (replay, the web gateway's kernels): inputs come decoded, every record keeps its
    payload; a derived record's message may be left undecoded (None), never wrong."""
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 3)
        await writer.flush()
        read = await collect(store.read(journal_name, decode_derived=False))
        tailed = []
        async with aclosing(store.tail(journal_name, 1, decode_derived=False)) as pages:
            async for page in pages:
                tailed.extend(page)
                if tailed[-1].seq == 6:
                    break
    for records in (read, tailed):
        assert [r.seq for r in records] == list(range(1, 7))
        for r in records:
            assert codec.decode(r.payload) == (r.message if r.causation is None or r.message is not None
                                               else codec.decode(r.payload))
            assert r.causation is not None or r.message == quote(1 + (r.seq - 1) // 2, "1.1", "1.1002")


@pytest.mark.faults
async def test_postgres_names_the_holder_of_the_lock(pg_dsn, journal_name):
    store = PostgresJournalStore(pg_dsn)
    async with store.writer(journal_name, **META):
        with pytest.raises(JournalLocked, match=r"foxhunt writer pid=\d+ .*server pid \d+"):
            async with store.writer(journal_name, **META):
                pass


async def test_a_producer_behind_a_busy_writer_yields_every_hundred_appends_within_the_queue(pg_dsn, journal_name):
    # batch_max 100: while the writer commits one batch, the next fills; the producer is asked to yield
    # once per RELIEVE_EVERY appends after that, or when the writer has taken a batch (not at every
    # append), and never holds more than queue_max
    store = PostgresJournalStore(pg_dsn, WriterPolicy(batch_max=100, queue_max=300))
    relieved = most_queued = 0
    batches: list[list[str]] = []
    async with store.writer(journal_name, **META) as writer:
        writer.watch_commits(lambda kinds, seconds: batches.append(kinds))
        for i in range(5_000):
            if writer.backlogged:
                await writer.relieve()
                relieved += 1
            writer.append(quote(i + 1, "1.1", "1.1002"))
            most_queued = max(most_queued, len(writer._rows))
        await writer.flush()
    assert most_queued <= 300
    assert 0 < relieved <= 5_000 // RELIEVE_EVERY + len(batches) + 1
    assert [r.seq for r in await collect(store.read(journal_name))] == list(range(1, 5_001))


async def test_a_batch_ends_with_the_row_a_flush_awaits_and_what_came_after_waits(pg_dsn, journal_name):
    # an order awaited under before_send commits without the market data appended after it
    writer = PostgresJournalWriter(pg_dsn, journal_name, WriterPolicy())
    batches: list[list[str]] = []
    writer.watch_commits(lambda kinds, seconds: batches.append(kinds))
    await writer.open(**META)
    try:
        quote_seq = writer.append(quote(1, "1.1", "1.1002"))
        writer.append(OrderSubmitted(ts_event=1, ts_init=1, order_id="o1", symbol="X"), quote_seq)
        async with anyio.create_task_group() as tg:
            flushed = anyio.Event()

            async def await_the_order():
                await writer.flush()
                flushed.set()

            tg.start_soon(await_the_order)
            await anyio.sleep(0)  # flush() has taken its target: the queue's end, the order
            for i in range(2, 12):
                writer.append(quote(i, "1.1", "1.1002"))
            await tg.start(writer.run)
            await flushed.wait()
            await writer.flush()
            tg.cancel_scope.cancel()
    finally:
        await writer.close()
    assert batches == [["QuoteTick", "OrderSubmitted"], ["QuoteTick"] * 10]


async def test_a_postgres_reader_holds_no_lock_while_its_caller_keeps_a_page(pg_dsn, journal_name):
    # the reader asks for the next page before it decodes this one, but ends that page's implicit
    # transaction before handing this one on: DDL on the journal's table (the writer's partitions)
    # must never wait for a caller that is slow to take the next page
    store = PostgresJournalStore(pg_dsn, page_size=4)
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 10)
    records = []
    async with aclosing(store.read(journal_name)) as pages:
        async for page in pages:
            records.extend(page)
            async with await psycopg.AsyncConnection.connect(pg_dsn) as other:
                await other.execute("SET lock_timeout = '1s'")
                await other.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")  # raises if the reader holds a lock
                cur = await other.execute(
                    "SELECT state FROM pg_stat_activity WHERE application_name = 'foxhunt reader'")
                assert await cur.fetchall() == [("idle",)]
                await other.rollback()
    assert [r.seq for r in records] == list(range(1, 21))


async def test_a_postgres_read_whose_connection_dies_raises_unavailable_naming_the_journal(pg_dsn, journal_name):
    store = PostgresJournalStore(pg_dsn, page_size=4)
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 10)
    seen = []
    with pytest.raises(JournalUnavailable, match=rf"failed while reading journal '{journal_name}'"):
        async with aclosing(store.read(journal_name)) as pages:
            async for page in pages:
                seen.extend(r.seq for r in page)
                if len(seen) == 4:  # the server ends the reader's backend between two pages
                    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
                        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                            " WHERE application_name = 'foxhunt reader'")
    assert seen[:4] == [1, 2, 3, 4] and seen == list(range(1, len(seen) + 1))  # what came before is whole, in order


async def test_a_postgres_read_closed_early_closes_its_connection(pg_dsn, journal_name):
    store = PostgresJournalStore(pg_dsn, page_size=4)
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 10)
    async with aclosing(store.read(journal_name)) as pages:
        async for page in pages:
            assert [r.seq for r in page] == [1, 2, 3, 4]
            break
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        with anyio.fail_after(5):
            while True:  # the server ends the backend a moment after the client closes
                cur = await conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'foxhunt reader'")
                if (await cur.fetchone())[0] == 0:
                    break
                await anyio.sleep(0.01)


def test_batches_never_split_an_input_from_its_derived_events():
    def rows(causations):
        return [(1, i + 1, "k", 0, 0, c, None, b"") for i, c in enumerate(causations)]

    # inputs at 0, 3, 4, 7; batch_max 6 would cut inside the group starting at 4
    queue = rows([None, 1, 1, None, None, 5, 5, None])
    assert group_cut(queue, 6) == 4
    assert group_cut(queue, 8) == 8
    assert group_cut(rows([None, 1, 1, 1, 1, None]), 3) == 5  # an oversized group goes whole
    assert group_cut(rows([None, 1, 1, 1]), 2) == 4


async def test_snapshots_are_kept_newest_first_replaced_at_the_same_seq_and_pruned(store, journal_name):
    async with store.writer(journal_name, **META) as writer:
        await append_quotes(writer, 5)
    assert await store.snapshots(journal_name) == []
    snap = Snapshot(seq=2, inputs=1, kernel="2", code="c", config=b"{}", state_digest="d", sha256="s", state=b"\x00x")
    for seq in (2, 6, 4):
        await store.save_snapshot(journal_name, snap._replace(seq=seq, inputs=seq), keep=2)
    kept = await store.snapshots(journal_name)
    assert [(s.seq, s.inputs) for s in kept] == [(6, 6), (4, 4)]  # seq 2 dropped: two kept
    assert kept[0]._replace(taken_at="") == snap._replace(seq=6, inputs=6) and kept[0].state == b"\x00x"
    await store.save_snapshot(journal_name, snap._replace(seq=6, state=b"again"), keep=2)
    assert [(s.seq, s.state) for s in await store.snapshots(journal_name)] == [(6, b"again"), (4, b"\x00x")]
    with pytest.raises(JournalNotFound):
        await store.snapshots("no-such-journal-" + journal_name)
    with pytest.raises(JournalNotFound):
        await store.save_snapshot("no-such-journal-" + journal_name, snap, keep=2)
