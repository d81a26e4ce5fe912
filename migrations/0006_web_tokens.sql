-- The web gateway's API tokens (foxhunt/web/tokens.py). A token is shown once, when it is made; the
-- database keeps only its SHA-256, so a copy of this table lets nobody in. A token has an operator's name
-- (what the daemon journals with every command sent with it) and a scope: read, or operate (read and
-- send commands). Revoking keeps the row, for the record.
CREATE TABLE web_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$'),
    scope        text NOT NULL CHECK (scope IN ('read', 'operate')),
    digest       bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
