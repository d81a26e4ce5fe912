"""The journal port (ports.Journal, ports.JournalStore) and PostgreSQL, its home.

- postgres.py       `PgJournalStore`: journals, their runs and snapshots in PostgreSQL
- pg_writer.py      the writer: group commit, back-pressure, fail-stop, reconnection
- pg_reader.py      reading a journal back, and tailing it (LISTEN/NOTIFY)
- pg_partitions.py  the events table's partitions: creating, archiving, restoring
- pg_copy.py        COPY's binary rows (compiled: every ingested row passes here)
- pg.py             connecting, translating PostgreSQL's errors, applying migrations/
- pg_embedded.py    the embedded cluster in the state directory
- memory.py         an in-memory journal (tests, and the contract suite's reference)
- discard.py        a journal that keeps nothing (what-if backtests, benchmarks)
"""
