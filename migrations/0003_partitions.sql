-- Journals of billions of events (docs/journal.md): `events` is partitioned by journal, and each journal's
-- partition by ranges of sequence numbers of a fixed span, kept per journal in journals.partition_span.
-- Range k of journal j holds seq in [k * span + 1, (k + 1) * span + 1) and is named events_j<j>_r<k>; the
-- writer creates ranges ahead of need (adapters/journal_pg_partitions.py). Whole old ranges are archived
-- to checksummed files and recorded in journal_archives, and can be restored.

ALTER TABLE journals ADD COLUMN partition_span bigint NOT NULL DEFAULT 50000000 CHECK (partition_span > 0);

CREATE TABLE journal_archives (
    journal_id  bigint NOT NULL,
    from_seq    bigint NOT NULL,
    to_seq      bigint NOT NULL,           -- inclusive
    location    text   NOT NULL,           -- the file: PostgreSQL binary COPY of the range's rows, in seq order
    sha256      text   NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (journal_id, from_seq)
);

ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
DROP TRIGGER events_notify ON events_unpartitioned;

CREATE TABLE events (
    journal_id  bigint NOT NULL,
    seq         bigint NOT NULL,
    kind        text   NOT NULL,
    ts_event    bigint NOT NULL,  -- nanoseconds since the Unix epoch, UTC
    ts_init     bigint NOT NULL,
    causation   bigint,           -- seq of the input that derived this event; NULL for inputs
    correlation bigint,
    payload     bytea  NOT NULL,
    PRIMARY KEY (journal_id, seq)
) PARTITION BY LIST (journal_id);

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION foxhunt_notify_events();

-- the partitions the existing rows need, then the rows
DO $$
DECLARE
    j record;
    k bigint;
BEGIN
    FOR j IN SELECT id, partition_span AS span FROM journals LOOP
        EXECUTE format('CREATE TABLE events_j%s PARTITION OF events FOR VALUES IN (%s) PARTITION BY RANGE (seq)',
                       j.id, j.id);
        FOR k IN SELECT DISTINCT (seq - 1) / j.span FROM events_unpartitioned WHERE journal_id = j.id LOOP
            EXECUTE format('CREATE TABLE events_j%s_r%s PARTITION OF events_j%s FOR VALUES FROM (%s) TO (%s)',
                           j.id, k, j.id, k * j.span + 1, (k + 1) * j.span + 1);
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO events SELECT * FROM events_unpartitioned ORDER BY journal_id, seq;
DROP TABLE events_unpartitioned;
