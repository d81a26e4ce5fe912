-- The journal: one row per journal (a live account or a backtest run), one row per event.
-- Payloads are msgpack bytes from foxhunt.messages.codec; the other columns exist for SQL and indexes.

CREATE TABLE journals (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    config        jsonb NOT NULL,
    config_digest text NOT NULL,
    fingerprint   jsonb NOT NULL
);

-- No foreign key to journals: the writer checks the journal once, under its advisory lock, and a
-- per-row foreign-key trigger would tax every COPY on the hot path.
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
);
