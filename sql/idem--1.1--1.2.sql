-- idem 1.1 -> 1.2. The 1.2 base script (sql/idem--1.2.sql) is generated from
-- the 1.1 base script and this file by the Makefile, so the two ways to 1.2
-- build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== maintenance: one worker round in one call (DESIGN.md "Version 1.2") ====
-- What the worker does in a round, for servers without it (no preload, or
-- the portable engine, driven by pg_cron): sweep_stale, keys past
-- max_attempts, the completers, purge_expired, purge_consumed,
-- purge_published, each in batches of idem.batch_size and at most a fixed
-- number of batches per stage, so one call is bounded. It runs in the
-- caller's transaction; each completer runs as the role that owns it, in a
-- subtransaction of its own (docs/operating.md, "run_maintenance").
-- Returns the counts per stage (README, "run_maintenance").
CREATE FUNCTION idem.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_run_maintenance'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- An operator's call, like purge_expired.
REVOKE ALL ON FUNCTION idem.run_maintenance() FROM PUBLIC;
-- ==== end maintenance ====

-- ==== messages: dumped with the keys, and settings read when only a placeholder ====
-- pg_dump carries an extension's table rows only when the script marks the
-- table. 1.1 marked the key table, its fence sequence and the policies, not
-- the inbox and the outbox: a dump restored elsewhere (a backup, a move to
-- the other engine) would consume its messages again and reissue outbox ids
-- and lease fences that relays already hold.
SELECT pg_catalog.pg_extension_config_dump('idem.consumed_message', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_event', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_event_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_lease_fence_seq', '');

-- Without the library (the portable engine) idem.outbox_* are placeholders:
-- one that was SET and then RESET, or SET LOCAL in an earlier transaction,
-- reads as '' rather than NULL, which must mean "not set" too.
CREATE OR REPLACE FUNCTION idem.outbox_failed(
    id bigint, lease_fence bigint, error text, retry_after interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_attempts integer := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_max_attempts', true), ''), '10')::integer;
    base interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_base', true), ''), '1s')::interval;
    cap interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_max', true), ''), '10min')::interval;
BEGIN
    -- idem.interval_is_positive is the rule of every interval idem takes
    -- (section intervals, below); zero is allowed here: retry at once.
    IF error IS NULL OR error OPERATOR(pg_catalog.=) ''
       OR NOT idem.interval_is_positive(retry_after, true) THEN
        RAISE EXCEPTION 'error must be given and retry_after must be finite and not negative'
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('outbox_failed(%s): error %L, retry_after %s.', id, error,
                                             COALESCE(retry_after::text, 'NULL')),
                  HINT = 'Say why the delivery failed; pass retry_after NULL for the exponential backoff.';
    END IF;
    UPDATE idem.outbox_event e
       SET status = CASE WHEN e.attempt_count OPERATOR(pg_catalog.>=) max_attempts
                         THEN 'dead'::idem.outbox_status ELSE 'pending'::idem.outbox_status END,
           available_at = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) COALESCE(
               retry_after,
               LEAST(cap, base OPERATOR(pg_catalog.*) pg_catalog.power(2, LEAST(e.attempt_count OPERATOR(pg_catalog.-) 1, 30)))
                   OPERATOR(pg_catalog.*) (0.5 OPERATOR(pg_catalog.+) (pg_catalog.random() OPERATOR(pg_catalog.*) 0.5))),
           leased_until = NULL, lease_fence = NULL, last_error = error
     WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id
       AND e.status OPERATOR(pg_catalog.=) 'leased'
       AND e.lease_fence OPERATOR(pg_catalog.=) outbox_failed.lease_fence;
    IF NOT FOUND THEN
        PERFORM idem.outbox_lease_lost(id, lease_fence, 'failed');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION idem.purge_published(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_retention', true), ''), '7d');
    deleted bigint;
BEGIN
    PERFORM idem.check_batch_limit(batch_limit);
    IF setting OPERATOR(pg_catalog.=) '-1' THEN
        RETURN 0;
    END IF;
    WITH doomed AS (
        SELECT d.ctid AS tid FROM idem.outbox_event d
         WHERE d.status OPERATOR(pg_catalog.=) 'published'
           AND d.published_at OPERATOR(pg_catalog.<=)
               (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) setting::pg_catalog.interval)
         ORDER BY d.published_at LIMIT batch_limit FOR UPDATE SKIP LOCKED)
    DELETE FROM idem.outbox_event r
     WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;
-- ==== end messages ====

-- ==== adapters: the calls an adapter needs (DESIGN.md "Version 1.2") ====
-- An adapter (Powertools' persistence layer, an HTTP middleware) forgets a
-- key whose handler failed, so a corrected request may run under it, and
-- reads a key by its name alone. Both are on the request path: granted by
-- hand with claim_idempotency_key (README, "Privileges"), never to PUBLIC.

-- The owner gives its key up: the row is deleted, the next claim is
-- new_claim with any request hash and a fence above every fence before
-- (idem.fence_seq). P4012 stale fence, P4015 missing or not owned, P4004
-- NULL fence (src/keys/release.cpp).
CREATE FUNCTION idem.release(scope text, key text, fence bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_release'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- What a claim with the stored request hash would answer, written nowhere
-- and without a fence; NULL for a key a claim would start afresh
-- (src/keys/peek.cpp). VOLATILE: it reads the row as it is now, as a claim does.
CREATE FUNCTION idem.peek(scope text, key text)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_peek'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION idem.release(text, text, bigint), idem.peek(text, text) FROM PUBLIC;
-- ==== end adapters ====
