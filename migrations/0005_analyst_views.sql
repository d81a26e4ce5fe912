-- Views over the journal for analysts who use psql (docs/journal.md, "Reading the journal with SQL").
--
-- A payload is msgpack (foxhunt/messages/codec.py): a map of a message's fields, tagged `kind`.
-- journal_payload() decodes one into jsonb, integers exact (jsonb numbers are numeric), so that the views
-- can name fields. It is written in PL/pgSQL, byte by byte: a few microseconds a field, fine for the
-- thousands of fills or orders of a run, slow for millions of quotes; `foxhunt journal export` writes a
-- whole journal to Parquet or CSV far faster. Fixed-point fields (prices, quantities, money) are nanos in
-- the payload; the views divide them by 10^9 into numeric, exact. Times are timestamptz (microseconds);
-- ts_event keeps the nanoseconds.
--
-- The msgpack format: github.com/msgpack/msgpack/blob/master/spec.md ("Formats").

CREATE FUNCTION journal_msgpack_uint(data bytea, pos integer, len integer) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    value numeric := 0;
BEGIN
    FOR i IN 0 .. len - 1 LOOP
        value := value * 256 + get_byte(data, pos + i);
    END LOOP;
    RETURN value;
END $$;

-- The msgpack value at byte `pos` (0-based), and where the next one starts.
CREATE FUNCTION journal_msgpack_at(data bytea, pos integer, OUT value jsonb, OUT next integer)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    b integer := get_byte(data, pos);
    n integer;
    width integer;
    head integer;
    bits numeric;
    exponent integer;
    exponent_bits integer;
    fraction integer;
    bias integer;
    mantissa numeric;
    magnitude double precision;
    item record;
    key record;
BEGIN
    IF b <= 127 THEN                                            -- positive fixint
        value := to_jsonb(b); next := pos + 1; RETURN;
    ELSIF b >= 224 THEN                                         -- negative fixint
        value := to_jsonb(b - 256); next := pos + 1; RETURN;
    ELSIF b = 192 THEN                                          -- nil
        value := 'null'::jsonb; next := pos + 1; RETURN;
    ELSIF b IN (194, 195) THEN                                  -- false, true
        value := to_jsonb(b = 195); next := pos + 1; RETURN;
    ELSIF b BETWEEN 204 AND 207 THEN                            -- uint 8, 16, 32, 64
        width := 1 << (b - 204);
        value := to_jsonb(journal_msgpack_uint(data, pos + 1, width)); next := pos + 1 + width; RETURN;
    ELSIF b BETWEEN 208 AND 211 THEN                            -- int 8, 16, 32, 64: two's complement
        width := 1 << (b - 208);
        bits := journal_msgpack_uint(data, pos + 1, width);
        IF bits >= 2::numeric ^ (8 * width - 1) THEN
            bits := bits - 2::numeric ^ (8 * width);
        END IF;
        value := to_jsonb(bits); next := pos + 1 + width; RETURN;
    ELSIF b IN (202, 203) THEN                                  -- float 32, 64 (IEEE 754)
        width := CASE b WHEN 202 THEN 4 ELSE 8 END;
        fraction := CASE b WHEN 202 THEN 23 ELSE 52 END;        -- the widths of the fraction and exponent
        exponent_bits := 8 * width - 1 - fraction;
        bias := (1 << (exponent_bits - 1)) - 1;
        bits := journal_msgpack_uint(data, pos + 1, width);
        exponent := (floor(bits / 2::numeric ^ fraction))::integer % (1 << exponent_bits);
        mantissa := mod(bits, 2::numeric ^ fraction);
        IF exponent = (1 << exponent_bits) - 1 THEN
            value := to_jsonb(CASE WHEN mantissa > 0 THEN 'NaN' ELSE 'Infinity' END);
        ELSE
            magnitude := CASE WHEN exponent = 0  -- subnormal: no implicit leading one
                         THEN mantissa::double precision * 2.0::double precision ^ (1 - bias - fraction)
                         ELSE (1 + mantissa::double precision / 2.0::double precision ^ fraction)
                              * 2.0::double precision ^ (exponent - bias) END;
            value := to_jsonb(CASE WHEN bits >= 2::numeric ^ (8 * width - 1) THEN -magnitude ELSE magnitude END);
        END IF;
        next := pos + 1 + width; RETURN;
    ELSIF b BETWEEN 160 AND 191 OR b BETWEEN 217 AND 219 THEN   -- fixstr, str 8, 16, 32
        IF b <= 191 THEN n := b - 160; head := 1;
        ELSE width := 1 << (b - 217); n := journal_msgpack_uint(data, pos + 1, width)::integer; head := 1 + width;
        END IF;
        value := to_jsonb(convert_from(substring(data FROM pos + head + 1 FOR n), 'UTF8'));
        next := pos + head + n; RETURN;
    ELSIF b BETWEEN 196 AND 198 THEN                            -- bin 8, 16, 32: base64 text
        width := 1 << (b - 196); n := journal_msgpack_uint(data, pos + 1, width)::integer;
        value := to_jsonb(translate(encode(substring(data FROM pos + 2 + width FOR n), 'base64'), E'\n', ''));
        next := pos + 1 + width + n; RETURN;
    ELSIF b BETWEEN 144 AND 159 OR b IN (220, 221) THEN         -- fixarray, array 16, 32
        IF b <= 159 THEN n := b - 144; next := pos + 1;
        ELSE width := CASE b WHEN 220 THEN 2 ELSE 4 END;
             n := journal_msgpack_uint(data, pos + 1, width)::integer; next := pos + 1 + width;
        END IF;
        value := '[]'::jsonb;
        FOR i IN 1 .. n LOOP
            item := journal_msgpack_at(data, next);
            value := value || jsonb_build_array(item.value); next := item.next;
        END LOOP;
        RETURN;
    ELSIF b BETWEEN 128 AND 143 OR b IN (222, 223) THEN         -- fixmap, map 16, 32
        IF b <= 143 THEN n := b - 128; next := pos + 1;
        ELSE width := CASE b WHEN 222 THEN 2 ELSE 4 END;
             n := journal_msgpack_uint(data, pos + 1, width)::integer; next := pos + 1 + width;
        END IF;
        value := '{}'::jsonb;
        FOR i IN 1 .. n LOOP
            key := journal_msgpack_at(data, next);
            item := journal_msgpack_at(data, key.next);
            value := value || jsonb_build_object(key.value #>> '{}', item.value); next := item.next;
        END LOOP;
        RETURN;
    END IF;
    RAISE EXCEPTION 'journal_payload: msgpack type byte % at offset % is not one foxhunt writes', b, pos;
END $$;

CREATE FUNCTION journal_payload(payload bytea) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT (journal_msgpack_at(payload, 0)).value $$;

-- nanos (a jsonb number) -> an exact numeric of 9 decimal places
CREATE FUNCTION journal_fixed(value jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ((value #>> '{}')::numeric / 1000000000)::numeric(38, 9) $$;

CREATE FUNCTION journal_time(ns bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT to_timestamp(ns / 1e9) $$;

-- Every event, decoded: the view the others read.
CREATE VIEW journal_events AS
SELECT j.name AS journal, e.seq, e.causation, e.kind, journal_time(e.ts_event) AS time, e.ts_event, e.ts_init,
       journal_payload(e.payload) AS body
FROM events e JOIN journals j ON j.id = e.journal_id;

CREATE VIEW journal_quotes AS
SELECT journal, seq, time, ts_event, body->>'symbol' AS symbol, journal_fixed(body->'bid') AS bid,
       journal_fixed(body->'ask') AS ask, journal_fixed(body->'bid_size') AS bid_size,
       journal_fixed(body->'ask_size') AS ask_size
FROM journal_events WHERE kind = 'QuoteTick';

CREATE VIEW journal_orders AS
SELECT journal, seq, causation, time, ts_event, body->>'order_id' AS order_id, body->>'strategy_id' AS strategy_id,
       body->>'symbol' AS symbol, body->>'side' AS side, body->>'order_type' AS order_type,
       journal_fixed(body->'quantity') AS quantity, journal_fixed(body->'price') AS price,
       body->>'time_in_force' AS time_in_force, (body->>'reduce_only')::boolean AS reduce_only
FROM journal_events WHERE kind = 'SubmitOrder';

CREATE VIEW journal_fills AS
SELECT journal, seq, time, ts_event, kind, body->>'order_id' AS order_id, body->>'symbol' AS symbol,
       body->>'side' AS side, body->>'trade_id' AS trade_id, journal_fixed(body->'last_qty') AS quantity,
       journal_fixed(body->'last_price') AS price, journal_fixed(body->'commission') AS commission,
       journal_fixed(body->'leaves_qty') AS leaves_qty, body->>'liquidity' AS liquidity
FROM journal_events WHERE kind IN ('OrderFilled', 'OrderPartiallyFilled');

-- Each denial the gate journaled, and each window of repeats it held back (`denials` says how many).
CREATE VIEW journal_denials AS
SELECT journal, seq, causation, time, ts_event, coalesce(body->>'order_id', body->>'first_order_id') AS order_id,
       body->>'symbol' AS symbol, body->>'reason' AS reason, body->>'detail' AS detail,
       CASE kind WHEN 'DenialsRepeated' THEN (body->>'repeats')::bigint ELSE 1 END AS denials
FROM journal_events WHERE kind IN ('OrderDenied', 'DenialsRepeated');

CREATE VIEW journal_positions AS
SELECT journal, seq, causation, time, ts_event, body->>'symbol' AS symbol, journal_fixed(body->'quantity') AS quantity,
       journal_fixed(body->'avg_price') AS avg_price, journal_fixed(body->'realized_pnl') AS realized_pnl,
       journal_fixed(body->'commissions') AS commissions, journal_fixed(body->'cash') AS cash
FROM journal_events WHERE kind = 'PositionChanged';

CREATE VIEW journal_state_changes AS
SELECT journal, seq, causation, time, ts_event, kind, body->>'symbol' AS symbol,
       coalesce(body->>'state', CASE WHEN (body->>'paused')::boolean THEN 'PAUSED' ELSE 'RESUMED' END) AS state,
       body->>'previous' AS previous, body->>'cause' AS cause
FROM journal_events WHERE kind IN ('TradingStateChanged', 'InstrumentStateChanged');

CREATE VIEW journal_scores AS
SELECT journal, seq, time, ts_event, body->>'model_id' AS model_id, body->>'symbol' AS symbol,
       (body->>'as_of')::bigint AS as_of, body->'horizons' AS horizons, body->'quantiles' AS quantiles,
       body->'outputs' AS outputs, (body->>'latency_ns')::bigint AS latency_ns
FROM journal_events WHERE kind = 'ModelScored';

CREATE VIEW journal_runs AS
SELECT journal, seq, time, ts_event, kind, (body->>'run_id')::bigint AS run_id, body->>'clock' AS clock,
       body->>'recorded_by' AS recorded_by, body->>'config_digest' AS config_digest, body->'fingerprint' AS fingerprint,
       body->>'reason' AS stop_reason
FROM journal_events WHERE kind IN ('RunStarted', 'RunStopped');
