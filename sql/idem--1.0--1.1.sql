-- idem 1.0 -> 1.1. Unreleased: it collects every 1.1 change. The 1.1 base
-- script (sql/idem--1.1.sql) is generated from 1.0 and this file by the
-- Makefile, so the two ways to 1.1 build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== invariants: one CHECK constraint calling one C function ====
-- At every INSERT and UPDATE statement PostgreSQL reads each CHECK
-- expression of the table back from its stored text, plans and compiles it
-- (ExecRelCheck), so a CHECK costs what its expression weighs. Measured per
-- new-key lifecycle (a claim and a mark_succeeded; bench/lifecycle_instructions.sh
-- and bench/shapes/, PostgreSQL 15): 1.0's thirteen constraints ~713k
-- instructions, more than the rest of the lifecycle (~465k); the same rules
-- as one SQL CHECK just as much (~719k); one CHECK calling one C function
-- over the fifteen columns the rules read ~129k. The function enforces the
-- thirteen rules (src/row_invariants.cpp); when one breaks, it raises 23514
-- (check_violation) itself, naming the rule by its 1.0 constraint name, so
-- a hand-written UPDATE is refused as before. NOT NULL stays on the columns.
--
-- It returns true or raises: a CHECK that merely returned false would make
-- PostgreSQL name the one constraint, not the rule. Not STRICT: most of the
-- rules are about which columns are NULL.
CREATE FUNCTION idem.request_invariants_hold(
    scope text, key text, request_hash text, status idem.idempotency_status,
    recovery_point text, fence bigint, attempt_count integer,
    locked_until timestamptz, response_code integer, response_body jsonb,
    failure_code text, failure_message text,
    created_at timestamptz, finished_at timestamptz, expires_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_request_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem.request_invariants_hold(
    text, text, text, idem.idempotency_status, text, bigint, integer, timestamptz,
    integer, jsonb, text, text, timestamptz, timestamptz, timestamptz) IS
    'The invariants of an idem.idempotency_request row: true, or error 23514 naming the rule the row breaks.';

-- The executor checks EXECUTE on a CHECK constraint's function as the role
-- that writes the row, so PUBLIC keeps it: every role that may write the
-- table (idem's SECURITY DEFINER functions, an operator, a role an operator
-- granted UPDATE) has its rows judged, as 1.0's plain CHECKs did, instead of
-- getting 42501. The function reads only its arguments and returns true or
-- raises: it reveals nothing and changes nothing, like idem.request_hash.
GRANT EXECUTE ON FUNCTION idem.request_invariants_hold(
    text, text, text, idem.idempotency_status, text, bigint, integer, timestamptz,
    integer, jsonb, text, text, timestamptz, timestamptz, timestamptz) TO PUBLIC;

-- One statement, so the table's ACCESS EXCLUSIVE lock (DROP CONSTRAINT
-- needs it) is taken once and held only for catalog changes. NOT VALID:
-- the thirteen constraints this statement drops guaranteed every existing
-- row already keeps the same rules, so a validating scan would prove
-- nothing and would block every claim for as long as it reads a large
-- table. New and updated rows are checked from this statement on.
ALTER TABLE idem.idempotency_request
    DROP CONSTRAINT scope_length,
    DROP CONSTRAINT key_length,
    DROP CONSTRAINT request_hash_present,
    DROP CONSTRAINT fence_positive,
    DROP CONSTRAINT attempt_count_positive,
    DROP CONSTRAINT recovery_point_present,
    DROP CONSTRAINT response_code_is_http_status,
    DROP CONSTRAINT expires_after_creation,
    DROP CONSTRAINT finished_means_succeeded,
    DROP CONSTRAINT processing_is_locked_and_open,
    DROP CONSTRAINT outcome_is_unlocked_and_dated,
    DROP CONSTRAINT success_has_response,
    DROP CONSTRAINT failure_has_code,
    ADD CONSTRAINT idempotency_request_invariants CHECK (idem.request_invariants_hold(
        scope, key, request_hash, status, recovery_point, fence, attempt_count,
        locked_until, response_code, response_body, failure_code, failure_message,
        created_at, finished_at, expires_at)) NOT VALID;

-- An empty table is validated at once (a fresh CREATE EXTENSION runs this
-- too: the 1.1 base script is 1.0 plus this file), so a new install shows
-- no NOT VALID and builds the same catalog as an upgraded empty one. A table
-- with keys stays NOT VALID until an operator runs
--   ALTER TABLE idem.idempotency_request VALIDATE CONSTRAINT idempotency_request_invariants;
-- which scans under SHARE UPDATE EXCLUSIVE: claims and completions go on.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM idem.idempotency_request) THEN
        ALTER TABLE idem.idempotency_request VALIDATE CONSTRAINT idempotency_request_invariants;
    END IF;
END
$$;
-- ==== end invariants ====

-- ==== lease: claim_or_wait, extend_lock, bind_lock_to_session ====
-- The token of the session a claim bound its key to
-- (idem.bind_lock_to_session; src/session_binding.hpp); NULL when unbound.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE idem.idempotency_request ADD COLUMN bound_session bigint;

COMMENT ON COLUMN idem.idempotency_request.bound_session IS
    'Token of the session that owns this processing key under idem.bind_lock_to_session; the key is stale once that session ends.';

-- Claims as claim_idempotency_key does, but waits (for at most max_wait)
-- instead of answering processing_active: README.md, "Waiting for a twin".
CREATE FUNCTION idem.claim_or_wait(
    scope text, key text, request_hash text, max_wait interval,
    claimed_by text DEFAULT NULL,
    lock_timeout interval DEFAULT NULL,
    retention interval DEFAULT NULL)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_claim_or_wait'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

-- The owner's longer lease; never shortens a lock.
CREATE FUNCTION idem.extend_lock(scope text, key text, fence bigint, extend_by interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_extend_lock'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

-- Request-path functions, granted by hand as the 1.0 ones are.
REVOKE ALL ON FUNCTION
    idem.claim_or_wait(text, text, text, interval, text, interval, interval),
    idem.extend_lock(text, text, bigint, interval)
FROM PUBLIC;

-- The counters gain the waits' and the bindings' columns: the view and its
-- function are made again with them (and their grants).
DROP VIEW idem.stats;
DROP FUNCTION idem.stats_counters();
CREATE FUNCTION idem.stats_counters(
    OUT datid oid,
    OUT new_claim bigint,
    OUT replay_success bigint,
    OUT processing_active bigint,
    OUT processing_stale bigint,
    OUT retryable_failure bigint,
    OUT final_failure bigint,
    OUT request_mismatches bigint,
    OUT stale_fences bigint,
    OUT marked_succeeded bigint,
    OUT marked_failed_retryable bigint,
    OUT marked_failed_final bigint,
    OUT recovery_points_set bigint,
    OUT rows_swept bigint,
    OUT rows_purged bigint,
    OUT worker_rounds bigint,
    OUT waits_started bigint,
    OUT waits_answered bigint,
    OUT waits_timed_out bigint,
    OUT wait_time_us bigint,
    OUT polling_fallbacks bigint,
    OUT session_bound_takeovers bigint,
    OUT last_worker_round timestamptz,
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE VIEW idem.stats AS
SELECT s.datid, d.datname,
       s.new_claim, s.replay_success, s.processing_active, s.processing_stale,
       s.retryable_failure, s.final_failure, s.request_mismatches, s.stale_fences,
       s.marked_succeeded, s.marked_failed_retryable, s.marked_failed_final,
       s.recovery_points_set, s.rows_swept, s.rows_purged,
       s.worker_rounds, s.waits_started, s.waits_answered, s.waits_timed_out,
       CASE WHEN s.waits_answered + s.waits_timed_out > 0
            THEN s.wait_time_us::float8 / 1000.0 / (s.waits_answered + s.waits_timed_out)
       END AS mean_wait_ms,
       s.polling_fallbacks, s.session_bound_takeovers,
       s.last_worker_round, s.stats_reset
  FROM idem.stats_counters() s
  LEFT JOIN pg_catalog.pg_database d ON d.oid = s.datid
 WHERE s.datid IS NULL OR d.oid IS NOT NULL;

COMMENT ON VIEW idem.stats IS
    'idem''s counters since stats_reset, one row per database; needs shared_preload_libraries = ''idem''.';

REVOKE ALL ON FUNCTION idem.stats_counters() FROM PUBLIC;
REVOKE ALL ON TABLE idem.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.stats_counters() TO pg_monitor;
GRANT SELECT ON TABLE idem.stats TO pg_monitor;
-- ==== end lease ====
