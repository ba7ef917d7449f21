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

-- ==== policy: per-scope policy, max_attempts and the completer (docs/policy.md) ====
-- One row per scope (exact name). NULL means "not set here": for every call
-- an explicit argument wins, then this row, then the setting. Claims read the
-- table through a per-backend cache (src/scope_policy.cpp) that the statement
-- trigger below invalidates at commit, so a committed change is in force at
-- the next call of every session and a claim never queries the table.
CREATE TABLE idem.scope_policy (
    scope text PRIMARY KEY,
    lock_timeout interval,
    retention interval,
    keep_forever boolean NOT NULL DEFAULT false,
    max_attempts integer,
    bind_lock_to_session boolean,
    completer regprocedure,
    completer_delay interval,
    CONSTRAINT scope_policy_scope_length
        CHECK (pg_catalog.length(scope) BETWEEN 1 AND 255),
    CONSTRAINT scope_policy_lock_timeout_positive
        CHECK (lock_timeout > '0'::interval AND pg_catalog.isfinite(lock_timeout)),
    CONSTRAINT scope_policy_retention_positive
        CHECK (retention > '0'::interval AND pg_catalog.isfinite(retention)),
    CONSTRAINT scope_policy_keep_forever_or_retention
        CHECK (NOT (keep_forever AND retention IS NOT NULL)),
    CONSTRAINT scope_policy_max_attempts_positive CHECK (max_attempts >= 1),
    CONSTRAINT scope_policy_completer_delay_positive
        CHECK (completer_delay > '0'::interval AND pg_catalog.isfinite(completer_delay))
);

COMMENT ON TABLE idem.scope_policy IS
    'Per-scope defaults: an explicit argument wins, then this row, then the idem.* setting.';

-- A completer must have the signature the worker calls, and the role that
-- names it must be able to act as the function's owner (be a member of that
-- role): the worker runs it as its owner, so naming a function owned by a
-- more privileged role would run code with rights the writer does not have.
-- Not SECURITY DEFINER: current_user is the writer.
CREATE FUNCTION idem.scope_policy_check_completer()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    IF NEW.completer IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT p.proowner, p.prokind = 'f' AND NOT p.proretset
               AND p.prorettype OPERATOR(pg_catalog.=) 'pg_catalog.void'::pg_catalog.regtype
               AND p.proargtypes OPERATOR(pg_catalog.=) pg_catalog.array_to_string(ARRAY[
                   'pg_catalog.text'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                   'pg_catalog.int8'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                   'pg_catalog.int4'::pg_catalog.regtype]::pg_catalog.oid[], ' ')::pg_catalog.oidvector
               AS fits
      INTO f
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) NEW.completer;
    IF NOT f.fits THEN
        RAISE EXCEPTION 'completer % does not have the signature of a completer', NEW.completer
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('scope "%s"', NEW.scope),
                  HINT = 'A completer is a function (scope text, key text, fence bigint, '
                         'recovery_point text, attempt_count integer) RETURNS void.';
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, f.proowner, 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to name completer %', NEW.completer
            USING ERRCODE = '42501',
                  DETAIL = pg_catalog.format('scope "%s": the completer runs as its owner %I, and role %I is not a member of it',
                                             NEW.scope, f.proowner::regrole, current_user),
                  HINT = 'Name a completer owned by a role you are a member of.';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER scope_policy_check_completer
    BEFORE INSERT OR UPDATE ON idem.scope_policy
    FOR EACH ROW EXECUTE FUNCTION idem.scope_policy_check_completer();

-- Sends a relcache invalidation of idem.scope_policy, which other backends
-- receive when the writing transaction commits; each drops its policy cache.
CREATE FUNCTION idem.scope_policy_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_scope_policy_changed'
LANGUAGE C;

CREATE TRIGGER scope_policy_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem.scope_policy
    FOR EACH STATEMENT EXECUTE FUNCTION idem.scope_policy_changed();

-- Nobody but the owner (the extension's owner) writes policies unless
-- granted: an operator grants INSERT, UPDATE, DELETE to the roles that set
-- policy (README, "Per-scope policy"). Monitoring reads them.
REVOKE ALL ON TABLE idem.scope_policy FROM PUBLIC;
GRANT SELECT ON TABLE idem.scope_policy TO pg_monitor;
REVOKE ALL ON FUNCTION idem.scope_policy_check_completer(), idem.scope_policy_changed() FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('idem.scope_policy', '');

-- key_health gains the abandoned keys waiting for their scope's completer:
-- abandoned (swept) or processing with the lock run out, older than the
-- scope's completer_delay (or due now when it has none).
CREATE OR REPLACE VIEW idem.key_health AS
WITH in_flight AS (
    SELECT r.scope,
           count(*) AS processing,
           count(*) FILTER (WHERE r.locked_until <= now()) AS stuck,
           now() - min(r.claimed_at) AS oldest_processing_age
      FROM idem.idempotency_request r
     WHERE r.status = 'processing'
     GROUP BY r.scope),
awaiting_purge AS (
    SELECT r.scope,
           count(*) AS expired_unpurged,
           now() - min(r.expires_at) AS oldest_expired_age
      FROM idem.idempotency_request r
     WHERE r.status <> 'processing' AND r.expires_at <= now()
     GROUP BY r.scope),
awaiting_completer AS (
    SELECT r.scope, count(*) AS awaiting_completer
      FROM idem.scope_policy sp
      JOIN idem.idempotency_request r ON r.scope = sp.scope
     WHERE sp.completer IS NOT NULL AND r.expires_at > now()
       AND (r.status = 'processing' AND r.locked_until <= now()
            OR r.status = 'failed_retryable' AND r.failure_code = 'abandoned')
     GROUP BY r.scope)
SELECT coalesce(f.scope, p.scope, c.scope) AS scope,
       coalesce(f.processing, 0) AS processing,
       coalesce(f.stuck, 0) AS stuck,
       f.oldest_processing_age,
       coalesce(p.expired_unpurged, 0) AS expired_unpurged,
       p.oldest_expired_age,
       coalesce(c.awaiting_completer, 0) AS awaiting_completer
  FROM in_flight f
  FULL JOIN awaiting_purge p ON p.scope = f.scope
  FULL JOIN awaiting_completer c ON c.scope = coalesce(f.scope, p.scope);
-- ==== end policy ====
