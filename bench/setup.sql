-- The benchmark's own helpers, schema bench: loading data into the three
-- peers' tables alike, the interleaved purge and the memory probe. Loaded by
-- bench/run after idem, bench/reference.sql and bench/floor/*.sql.

CREATE SCHEMA bench;

-- The request hash every workload sends: a SHA-256 in hex, like a real one.
CREATE FUNCTION bench.hash() RETURNS text IMMUTABLE LANGUAGE sql
AS $$ SELECT 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c' $$;

CREATE TABLE bench.peers (peer text PRIMARY KEY, tbl regclass, fence_seq regclass);
INSERT INTO bench.peers VALUES
    ('idem', 'idem.idempotency_request', 'idem.fence_seq'),
    ('ref', 'ref.idempotency_request', 'ref.fence_seq'),
    ('floor', 'floor.idempotency_request', 'floor.fence_seq');

-- n finished keys '1'..'n' of a scope in every peer's table; expired ones
-- are ordered by expires_at in key order, as a purge would meet them.
CREATE PROCEDURE bench.fill(p_scope text, p_n integer, p_expired boolean,
                            p_only text DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT * FROM bench.peers x WHERE p_only IS NULL OR x.peer = p_only ORDER BY x.peer LOOP
        EXECUTE format($sql$
            INSERT INTO %s (scope, key, request_hash, status, recovery_point, fence,
                attempt_count, claimed_at, response_code, response_body, created_at,
                updated_at, finished_at, expires_at)
            SELECT $1, g::text, bench.hash(), 'succeeded', 'finished', nextval(%L), 1,
                   t0, 200, jsonb_build_object('id', g), t0, t0, t0,
                   CASE WHEN $3 THEN t0 + interval '1 day' + g * interval '1 millisecond'
                        ELSE 'infinity' END
            FROM generate_series(1, $2) g,
                 LATERAL (SELECT now() - CASE WHEN $3 THEN interval '3 days' ELSE interval '0' END AS t0) c
            ON CONFLICT DO NOTHING$sql$, p.tbl, p.fence_seq)
        USING p_scope, p_n, p_expired;
        COMMIT;
    END LOOP;
END;
$$;

-- Purge every peer's expired keys in batches of p_batch, the peers taking
-- turns batch by batch so that background noise hits them alike; each batch
-- is its own transaction and is timed with its commit.
CREATE TABLE bench.purge_result (peer text PRIMARY KEY, rows bigint, seconds float8);

CREATE PROCEDURE bench.purge_interleaved(p_batch integer)
LANGUAGE plpgsql
AS $$
DECLARE
    t0 timestamptz;
    n bigint;
    busy boolean := true;
    v_peer text;
BEGIN
    DELETE FROM bench.purge_result;
    INSERT INTO bench.purge_result VALUES ('idem', 0, 0), ('ref', 0, 0), ('floor', 0, 0);
    COMMIT;
    WHILE busy LOOP
        busy := false;
        FOREACH v_peer IN ARRAY ARRAY['idem', 'ref', 'floor'] LOOP
            t0 := clock_timestamp();
            n := CASE v_peer
                   WHEN 'idem' THEN idem.purge_expired(p_batch)
                   WHEN 'ref' THEN ref.purge_expired(p_batch)
                   ELSE floor_client.purge_expired(p_batch) END;
            COMMIT;
            UPDATE bench.purge_result r
            SET rows = r.rows + n,
                seconds = r.seconds + extract(epoch FROM clock_timestamp() - t0)
            WHERE r.peer = v_peer;
            COMMIT;
            busy := busy OR n > 0;
        END LOOP;
    END LOOP;
END;
$$;

-- A backend's total memory across many claims, each its own transaction,
-- sent by one pgbench client as an application would send them (bench/run's
-- memory cell): claim n is bench.memory_step's nth call. Half the claims are
-- of keys never seen (new_claim, then mark_succeeded); the other half cycle
-- over p_keys keys, a third of which always fail retryably (so they are taken
-- over again and again) while the rest succeed once and replay from then on.
-- The first p_warmup claims fill the caches (plans, catalog) and are not
-- counted; from there a sample every p_every claims records the backend's
-- total and idem.stats' counters. Not a procedure looping with COMMIT: each
-- COMMIT there of a transaction that wrote leaves a small allocation of PostgreSQL's
-- own in the procedure's SPI context, which the sum would count as idem's
-- (bench/README.md, "Memory over 10 million claims in one backend").
CREATE TABLE bench.memory_samples (claims bigint, bytes bigint, pid integer,
                                   new_claim bigint, replay_success bigint,
                                   retryable_failure bigint);

CREATE SEQUENCE bench.memory_calls;

CREATE FUNCTION bench.backend_bytes() RETURNS bigint LANGUAGE sql
AS $$ SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts $$;

CREATE FUNCTION bench.memory_step(p_keys integer, p_warmup integer, p_every integer)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    i bigint := nextval('bench.memory_calls');
    c idem.claim;
    k text;
    retry boolean;
BEGIN
    IF i % 2 = 0 THEN
        k := 'n' || i;
        retry := false;
    ELSE
        k := 'c' || (i % p_keys);
        retry := (i % p_keys) % 3 = 0;
    END IF;
    c := idem.claim_idempotency_key('memory', k, bench.hash());
    IF c.kind IN ('new_claim', 'retryable_failure') THEN
        IF retry THEN
            PERFORM idem.mark_failed('memory', k, c.fence, true, 'probe');
        ELSE
            PERFORM idem.mark_succeeded('memory', k, c.fence, 200, '{"ok": true}');
        END IF;
    END IF;
    -- idem.stats counts a claim when the call returns: this one included.
    IF i >= p_warmup AND (i - p_warmup) % p_every = 0 THEN
        INSERT INTO bench.memory_samples
        SELECT i - p_warmup, bench.backend_bytes(), pg_backend_pid(),
               s.new_claim, s.replay_success, s.retryable_failure
        FROM idem.stats s WHERE s.datname = current_database();
    END IF;
END;
$$;

-- What pgbench's backends wait on: pg_stat_activity sampled every p_every
-- seconds for p_seconds, counted by wait event ('CPU' when a backend waits on
-- nothing). Kept in a variable, not a table, so that sampling writes no WAL
-- into the cell it observes; the activity snapshot is cleared before each
-- sample (a transaction otherwise sees its first one throughout).
CREATE FUNCTION bench.sample_waits(p_seconds double precision, p_every double precision)
RETURNS TABLE (wait text, samples bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_seen text[] := '{}';
    v_until timestamptz := clock_timestamp() + make_interval(secs => p_seconds);
BEGIN
    WHILE clock_timestamp() < v_until LOOP
        PERFORM pg_stat_clear_snapshot();
        v_seen := v_seen || ARRAY(
            SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU')
            FROM pg_stat_activity a
            WHERE a.application_name = 'pgbench' AND a.backend_type = 'client backend');
        PERFORM pg_sleep(p_every);
    END LOOP;
    RETURN QUERY SELECT s.w, count(*) FROM unnest(v_seen) s(w) GROUP BY s.w ORDER BY count(*) DESC;
END;
$$;
