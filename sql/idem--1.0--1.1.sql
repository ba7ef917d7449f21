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

-- ==== clients: Retry-After worth sending, and the stored answer at completion ====
-- How long this scope's requests take (claim to outcome), a running estimate
-- kept per database and scope by mark_succeeded / mark_failed
-- (src/request_durations.hpp); NULL while nothing is known.
CREATE FUNCTION idem.typical_duration(scope text)
RETURNS interval
AS 'MODULE_PATHNAME', 'idem_typical_duration'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION idem.typical_duration(text) IS
    'How long a request of this scope typically takes from claim to outcome, estimated from recent completions; NULL when unknown.';

-- The Retry-After, in whole seconds, for a claim that answered
-- processing_active: the scope's typical duration rounded up (1 second when
-- unknown), never past the end of the owner's lock, 0 once the lock has run
-- out (a retry may take the key over at once); NULL for any other kind,
-- which has nothing to wait for. (LEAST and GREATEST are SQL syntax, not
-- functions a search_path could redirect.) SECURITY DEFINER so that EXECUTE
-- on it alone is enough: it reads nothing but the estimate.
CREATE FUNCTION idem.retry_after(scope text, claim idem.claim)
RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE
    WHEN ($2).kind OPERATOR(pg_catalog.<>) 'processing_active'::idem.claim_kind
      OR ($2).locked_until IS NULL THEN NULL
    WHEN ($2).locked_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() THEN 0
    ELSE LEAST(
      pg_catalog.ceil(EXTRACT(EPOCH FROM ($2).locked_until
                              OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())),
      GREATEST(1, pg_catalog.ceil(EXTRACT(EPOCH FROM
        COALESCE(idem.typical_duration($1), pg_catalog.make_interval(secs => 1))))))::integer
  END
$$;

COMMENT ON FUNCTION idem.retry_after(text, idem.claim) IS
    'Seconds a twin should wait before retrying a processing_active claim: the scope''s typical duration, never past the lock''s end; NULL for other kinds.';

-- mark_succeeded / mark_failed, then the answer exactly as a replay of the
-- key will carry it: send this answer's response_body (as text) the first
-- time, and every replay is the same bytes. kind is what a claim of the key
-- now answers (replay_success, final_failure, or retryable_failure, which a
-- retry takes over); fence is NULL: this call grants nothing.
CREATE FUNCTION idem.mark_succeeded_returning(scope text, key text, fence bigint,
    response_code integer, response_body jsonb DEFAULT NULL,
    result_ref_type text DEFAULT NULL, result_ref_id text DEFAULT NULL)
RETURNS idem.claim
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT idem.mark_succeeded($1, $2, $3, $4, $5, $6, $7);
  SELECT idem.stored_answer($1, $2);
$$;

CREATE FUNCTION idem.mark_failed_returning(scope text, key text, fence bigint,
    retryable boolean, failure_code text, failure_message text DEFAULT NULL,
    response_code integer DEFAULT NULL, response_body jsonb DEFAULT NULL)
RETURNS idem.claim
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT idem.mark_failed($1, $2, $3, $4, $5, $6, $7, $8);
  SELECT idem.stored_answer($1, $2);
$$;

-- The completed row as the claim type; for the two functions above only.
CREATE FUNCTION idem.stored_answer(scope text, key text)
RETURNS idem.claim
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT ROW(CASE r.status
               WHEN 'succeeded'::idem.idempotency_status THEN 'replay_success'
               WHEN 'failed_final'::idem.idempotency_status THEN 'final_failure'
               ELSE 'retryable_failure' END::idem.claim_kind,
             NULL::bigint, r.attempt_count, r.recovery_point, r.response_code,
             r.response_body, r.result_ref_type, r.result_ref_id, r.failure_code,
             r.failure_message, r.locked_until, r.expires_at)::idem.claim
    FROM idem.idempotency_request r
   WHERE r.scope OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2
$$;

REVOKE ALL ON FUNCTION
    idem.typical_duration(text),
    idem.retry_after(text, idem.claim),
    idem.mark_succeeded_returning(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed_returning(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.stored_answer(text, text)
FROM PUBLIC;
-- ==== end clients ====
