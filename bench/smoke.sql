-- The smoke check: one small deterministic scenario played against each
-- peer, every step its own transaction; the three must agree step by step
-- (claim kinds, refusals by SQLSTATE, purge counts). bench/run --smoke runs it.

CREATE TABLE bench.smoke_steps (
    step integer PRIMARY KEY, op text NOT NULL, key text,
    other_hash boolean NOT NULL DEFAULT false,
    lock_timeout interval, retention interval,
    fence_age integer NOT NULL DEFAULT 0);  -- 0: the latest fence issued for key, 1: the one before

INSERT INTO bench.smoke_steps (step, op, key, other_hash, lock_timeout, retention, fence_age) VALUES
    (1, 'claim', 'a', false, NULL, NULL, 0),         -- new_claim
    (2, 'claim', 'a', false, NULL, NULL, 0),         -- processing_active
    (3, 'claim', 'a', true, NULL, NULL, 0),          -- P4002
    (4, 'succeed', 'a', false, NULL, NULL, 0),
    (5, 'claim', 'a', false, NULL, NULL, 0),         -- replay_success
    (6, 'succeed', 'a', false, NULL, NULL, 0),       -- P4010: not owned any more
    (7, 'claim', 'b', false, NULL, NULL, 0),
    (8, 'fail_retry', 'b', false, NULL, NULL, 0),
    (9, 'claim', 'b', false, NULL, NULL, 0),         -- retryable_failure, new fence
    (10, 'succeed', 'b', false, NULL, NULL, 1),      -- P4012: the zombie's fence
    (11, 'succeed', 'b', false, NULL, NULL, 0),
    (12, 'claim', 'b', false, NULL, NULL, 0),        -- replay_success
    (13, 'claim', 'c', false, NULL, NULL, 0),
    (14, 'fail_final', 'c', false, NULL, NULL, 0),
    (15, 'claim', 'c', false, NULL, NULL, 0),        -- final_failure
    (16, 'claim', 'd', false, '1 millisecond', NULL, 0),
    (17, 'sleep', NULL, false, NULL, NULL, 0),
    (18, 'claim', 'd', false, NULL, NULL, 0),        -- processing_stale
    (19, 'succeed', 'd', false, NULL, NULL, 0),
    (20, 'claim', 'e', false, NULL, '20 milliseconds', 0),
    (21, 'succeed', 'e', false, NULL, NULL, 0),
    (22, 'claim', 'f', false, NULL, '20 milliseconds', 0),
    (23, 'fail_final', 'f', false, NULL, NULL, 0),
    (24, 'sleep', NULL, false, NULL, NULL, 0),
    (25, 'claim', 'e', true, NULL, NULL, 0),         -- new_claim: expired, starts afresh
    (26, 'purge', NULL, false, NULL, NULL, 0),       -- 1: only f
    (27, 'claim', 'f', false, NULL, NULL, 0),        -- new_claim: purged
    (28, 'purge', NULL, false, NULL, NULL, 0);       -- 0

CREATE TABLE bench.smoke_fences (peer text, key text, n serial, fence bigint);
CREATE TABLE bench.smoke_result (peer text, step integer, outcome text, PRIMARY KEY (peer, step));

CREATE FUNCTION bench.smoke_step(p_peer text, s bench.smoke_steps)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    api text := CASE p_peer WHEN 'floor' THEN 'floor_client' ELSE p_peer END;
    h text := CASE WHEN s.other_hash THEN 'another request' ELSE bench.hash() END;
    f bigint;
    kind text;
    n bigint;
BEGIN
    SELECT x.fence INTO f FROM bench.smoke_fences x
    WHERE x.peer = p_peer AND x.key = s.key ORDER BY x.n DESC OFFSET s.fence_age LIMIT 1;
    CASE s.op
    WHEN 'claim' THEN
        EXECUTE format('SELECT kind::text, fence FROM %I.claim_idempotency_key($1, $2, $3, NULL, $4, $5)', api)
            INTO kind, f USING 'smoke', s.key, h, s.lock_timeout, s.retention;
        IF f IS NOT NULL THEN
            INSERT INTO bench.smoke_fences (peer, key, fence) VALUES (p_peer, s.key, f);
        END IF;
        RETURN kind;
    WHEN 'succeed' THEN
        EXECUTE format('SELECT %I.mark_succeeded($1, $2, $3, 200)', api) USING 'smoke', s.key, f;
    WHEN 'fail_retry', 'fail_final' THEN
        EXECUTE format('SELECT %I.mark_failed($1, $2, $3, $4, $5)', api)
            USING 'smoke', s.key, f, s.op = 'fail_retry', 'smoke_failure';
    WHEN 'purge' THEN
        EXECUTE format('SELECT %I.purge_expired(100)', api) INTO n;
        RETURN 'purged ' || n;
    WHEN 'sleep' THEN
        PERFORM pg_sleep(0.05);
    END CASE;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN 'error ' || SQLSTATE;
END;
$$;

CREATE PROCEDURE bench.smoke_scenario(p_peer text)
LANGUAGE plpgsql
AS $$
DECLARE
    s bench.smoke_steps;
BEGIN
    FOR s IN SELECT * FROM bench.smoke_steps ORDER BY step LOOP
        INSERT INTO bench.smoke_result VALUES (p_peer, s.step, bench.smoke_step(p_peer, s));
        COMMIT;
    END LOOP;
END;
$$;
