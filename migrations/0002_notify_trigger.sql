-- Wake journal followers (LISTEN foxhunt_events) once per inserting statement, inside its transaction:
-- the writer then needs no round trip of its own for the NOTIFY, and rows inserted by any other tool
-- wake followers too. No payload: followers re-read from their own position, which is the truth.
CREATE FUNCTION foxhunt_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('foxhunt_events', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION foxhunt_notify_events();
