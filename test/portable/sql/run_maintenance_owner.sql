-- idem.run_maintenance() on the portable engine as a managed service has it:
-- the extension's owner is the database's owner, NOT a superuser (it ran
-- dist/idem-portable.sql); a third role, the scheduler's (pg_cron's job
-- owner), calls run_maintenance; completers belong to an application role,
-- which run_maintenance leaves them to (the portable engine calls a
-- completer only in a call made as its owner): the application role runs
-- them with idem.run_completers(), logged in as itself.
-- No completer reaches the extension owner's rights or the caller's.
-- Run by test/portable/run_maintenance_owner.sh as role maint_dbo.
\set ON_ERROR_STOP 0
\set VERBOSITY default
SET client_min_messages = warning;
SELECT rolsuper AS owner_is_superuser FROM pg_roles WHERE rolname = current_user;
SELECT count(*) AS idem_installed FROM pg_namespace WHERE nspname = 'idem';

CREATE ROLE maint_ops;          -- the scheduler's role
CREATE ROLE maint_app LOGIN;    -- owns the completers, and runs them
GRANT maint_ops, maint_app TO maint_dbo;
GRANT USAGE ON SCHEMA idem TO maint_ops, maint_app;
GRANT EXECUTE ON FUNCTION idem.run_maintenance() TO maint_ops;
GRANT EXECUTE ON FUNCTION
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text)
  TO maint_app;
CREATE SCHEMA app AUTHORIZATION maint_app;
CREATE SCHEMA ops AUTHORIZATION maint_ops;
-- The caller's secret: only maint_ops reads it.
SET ROLE maint_ops;
CREATE TABLE ops.secret (v text);
RESET ROLE;

SET ROLE maint_app;
CREATE FUNCTION app.app_done(scope text, key text, fence bigint, what text) RETURNS void
LANGUAGE sql AS $$
  SELECT idem.mark_succeeded(scope, key, fence, 200,
      pg_catalog.jsonb_build_object('ran_as', CURRENT_USER::text, 'what', what))
$$;
CREATE FUNCTION app.app_good(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN PERFORM app.app_done(scope, key, fence, 'good'); END $$;
-- The extension owner's table, directly.
CREATE FUNCTION app.app_read_keys(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN PERFORM app.app_done(scope, key, fence, (SELECT count(*)::text FROM idem.idempotency_request)); END $$;
-- The caller's table.
CREATE FUNCTION app.app_read_ops(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN PERFORM app.app_done(scope, key, fence, (SELECT count(*)::text FROM ops.secret)); END $$;
-- Back to the session's, or the extension owner's, role.
CREATE FUNCTION app.app_reset_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN RESET ROLE; PERFORM app.app_done(scope, key, fence, 'reset role'); END $$;
CREATE FUNCTION app.app_set_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN SET ROLE maint_dbo; PERFORM app.app_done(scope, key, fence, 'set role'); END $$;
CREATE FUNCTION app.app_set_config_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN PERFORM pg_catalog.set_config('role', 'maint_ops', false);
      PERFORM app.app_done(scope, key, fence, 'set_config role'); END $$;
-- A function left in pg_temp for the next completer or the caller.
CREATE FUNCTION app.app_temp_function(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
  EXECUTE 'CREATE FUNCTION pg_temp.app_trap() RETURNS text LANGUAGE sql AS $f$ SELECT CURRENT_USER::text $f$';
  PERFORM app.app_done(scope, key, fence, 'temp function');
END $$;
-- Not SECURITY DEFINER: it would run as the extension's owner; refused.
CREATE FUNCTION app.app_invoker(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM app.app_done(scope, key, fence, (SELECT count(*)::text FROM idem.idempotency_request)); END $$;
RESET ROLE;

INSERT INTO idem.scope_policy (scope, completer)
SELECT 's_' || s, 'app.app_' || s || '(text, text, bigint, text, integer)'
  FROM unnest(ARRAY['good', 'read_keys', 'read_ops', 'reset_role', 'set_role',
                    'set_config_role', 'temp_function', 'invoker']) WITH ORDINALITY AS u(s, n);

-- One abandoned key per scope, in the array's order.
DO $$
DECLARE s record;
BEGIN
  FOR s IN SELECT p.scope, row_number() OVER (ORDER BY p.scope) AS n FROM idem.scope_policy p LOOP
    PERFORM idem.claim_idempotency_key(s.scope, 'k', 'h');
    UPDATE idem.idempotency_request r
       SET status = 'failed_retryable', failure_code = 'abandoned', failure_message = 'test',
           locked_until = NULL, finished_at = now() - s.n * interval '1 minute',
           updated_at = now() - s.n * interval '1 minute'
     WHERE r.scope = s.scope AND r.key = 'k';
  END LOOP;
END $$;

-- The scheduler's call (its session has a temporary schema already).
SET ROLE maint_ops;
CREATE TEMP TABLE ops_temp (v int);
SELECT idem.run_maintenance() AS report;
SELECT CURRENT_USER AS caller_after;
SELECT count(*) AS temp_functions_left FROM pg_proc WHERE pronamespace = pg_my_temp_schema();
RESET ROLE;

SELECT r.scope, r.status, r.claimed_by, r.response_body->>'ran_as' AS ran_as, r.response_body->>'what' AS what
  FROM idem.idempotency_request r ORDER BY r.scope;

-- The application role runs its completers itself, logged in as itself:
-- each runs as maint_app whatever its SECURITY, and reaches nothing of
-- the extension owner's or the scheduler's.
GRANT EXECUTE ON FUNCTION idem.run_completers(), idem.portable_claim_own_completer_keys(),
    idem.portable_completer_outcome(text, text, bigint) TO maint_app;
\c - maint_app
SET client_min_messages = warning;
SELECT idem.run_completers() AS app_report;
SELECT CURRENT_USER AS caller_after, SESSION_USER AS session_after;
\c - maint_dbo
SET client_min_messages = warning;
SELECT r.scope, r.status, r.claimed_by, r.response_body->>'ran_as' AS ran_as, r.response_body->>'what' AS what
  FROM idem.idempotency_request r ORDER BY r.scope;

-- One call is bounded: at most 10 batches of idem.batch_size a stage (a
-- plain setting without the library), and "more" says work is left.
DELETE FROM idem.scope_policy;
SELECT count(*) AS stale_keys
  FROM generate_series(1, 12) g, idem.claim_idempotency_key('bulk', 'k' || g, 'h');
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second' WHERE scope = 'bulk';
SET ROLE maint_ops;
SET idem.batch_size = 1;
SELECT r->'swept' AS swept, r->'batches' AS batches, r->'more' AS more FROM idem.run_maintenance() r;
SELECT r->'swept' AS swept, r->'batches' AS batches, r->'more' AS more FROM idem.run_maintenance() r;
SET idem.batch_size = 'many';
SELECT idem.run_maintenance();
RESET idem.batch_size;
RESET ROLE;
DROP OWNED BY maint_app, maint_ops;
DROP ROLE maint_app, maint_ops;
