-- Kernel snapshots (foxhunt/runtime/snapshots.py): the kernel's whole state after the input at `seq`, so
-- that start-up feeds only the inputs after it, and a journal whose old ranges are archived can still
-- start. A cache of the journal, never a source of truth: any row may be deleted; start-up uses one only
-- where its kernel behaviour, code and configuration are this foxhunt's and its bytes are unchanged.
CREATE TABLE snapshots (
    journal_id    bigint NOT NULL REFERENCES journals (id),
    seq           bigint NOT NULL CHECK (seq > 0),  -- the state after every input up to this one
    inputs        bigint NOT NULL,                  -- how many inputs that state has taken
    kernel        text   NOT NULL,                  -- core/kernel.py BEHAVIOUR
    code          text   NOT NULL,                  -- snapshots.code_digest(): the code that pickled it
    config        bytea  NOT NULL,                  -- the trading configuration the kernel was built with (JSON)
    state_digest  text   NOT NULL,                  -- Kernel.state_digest() of the state
    sha256        text   NOT NULL,                  -- of `state`
    state         bytea  NOT NULL,                  -- the kernel, pickled
    taken_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (journal_id, seq)
);
