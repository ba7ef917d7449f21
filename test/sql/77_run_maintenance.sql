-- idem.run_maintenance() (docs/contract.md "One worker round in one call"): one worker round in one
-- call, in the caller's transaction, with a jsonb report of what each stage
-- did; each completer runs as its owner, in a subtransaction of its own, with
-- no way back to the caller's or the extension owner's rights.
TRUNCATE idem.idempotency_request;
TRUNCATE idem.consumed_message;
TRUNCATE idem.outbox_event;

-- An operator's call: nothing for PUBLIC; pinned like every definer.
SELECT prosecdef, proconfig, proacl IS NOT NULL AS acl_set,
       has_function_privilege('public', 'idem.run_maintenance()', 'EXECUTE') AS public_may
  FROM pg_proc WHERE oid = 'idem.run_maintenance()'::regprocedure;
CREATE ROLE idem_maint_nobody;
SET ROLE idem_maint_nobody;
SELECT error_of($$SELECT idem.run_maintenance()$$) AS not_for_public;
RESET ROLE;

-- Nothing to do: every count is zero, every key is there.
SELECT idem.run_maintenance() AS idle;

-- One of each: a stale key to sweep, an expired key to purge, an expired
-- consumed message, an event published before idem.outbox_retention.
SELECT kind FROM idem.claim_idempotency_key('maint', 'stale', 'h');
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'
 WHERE scope = 'maint' AND key = 'stale';
SELECT fence AS f FROM idem.claim_idempotency_key('maint', 'old', 'h', retention => interval '1 hour') \gset
SELECT idem.mark_succeeded('maint', 'old', :f, 200);
SELECT status FROM idem.force_expire('maint', 'old');
SELECT idem.consume_once('maint-consumer', 'm1', 'h', interval '1 hour');
UPDATE idem.consumed_message SET consumed_at = now() - interval '2 hours',
       expires_at = now() - interval '1 hour';
SELECT idem.outbox_put('maint', 'k', 'shipped', '{}') AS event_id \gset
SELECT id AS leased_id, lease_fence AS lf FROM idem.outbox_lease() \gset
SELECT idem.outbox_published(:leased_id, :lf);
UPDATE idem.outbox_event SET published_at = now() - interval '30 days';
SELECT idem.run_maintenance() AS one_of_each;
SELECT key, status, failure_code FROM idem.idempotency_request ORDER BY key;
SELECT count(*) AS messages_left FROM idem.consumed_message;
SELECT count(*) AS events_left FROM idem.outbox_event;

-- It is one call: rolled back, nothing it did stays.
BEGIN;
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second', status = 'processing',
       failure_code = NULL, failure_message = NULL, finished_at = NULL
 WHERE scope = 'maint' AND key = 'stale';
SELECT (idem.run_maintenance())->'swept' AS swept_then_rolled_back;
ROLLBACK;
SELECT key, status, failure_code FROM idem.idempotency_request ORDER BY key;
TRUNCATE idem.idempotency_request;

-- ---- completers ----
-- Completers belong to a role that is neither the caller nor the extension's
-- owner, and are SECURITY DEFINER (the only kind of another role's the
-- portable engine runs); a table only the extension's owner (the superuser
-- here) may read.
CREATE ROLE idem_maint_owner;
GRANT EXECUTE ON FUNCTION
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb)
  TO idem_maint_owner;
CREATE TABLE maint_secret (v text);
INSERT INTO maint_secret VALUES ('only the owner reads this');
REVOKE ALL ON maint_secret FROM PUBLIC;
-- The caller's session already has a temporary schema.
CREATE TEMP TABLE maint_caller_temp (v int);

-- Each completer records who ran it, then does its one thing (maint_done is
-- SECURITY INVOKER: it reports the role the completer runs as).
CREATE FUNCTION maint_done(scope text, key text, fence bigint, what text) RETURNS void
LANGUAGE sql AS $$
  SELECT idem.mark_succeeded(scope, key, fence, 200,
      pg_catalog.jsonb_build_object('ran_as', CURRENT_USER::text, 'what', what))
$$;
CREATE FUNCTION maint_good(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN PERFORM public.maint_done(scope, key, fence, 'good, attempt ' || attempt_count); END $$;
CREATE FUNCTION maint_nothing(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN END $$;
CREATE FUNCTION maint_raise(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM public.maint_done(scope, key, fence, 'undone by the raise');
  RAISE EXCEPTION 'the completer gives up' USING ERRCODE = 'XX123';
END $$;
CREATE FUNCTION maint_reset_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN RESET ROLE; PERFORM public.maint_done(scope, key, fence, 'reset role'); END $$;
CREATE FUNCTION maint_set_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN EXECUTE 'SET ROLE ' || quote_ident(SESSION_USER::text);
      PERFORM public.maint_done(scope, key, fence, 'set role'); END $$;
CREATE FUNCTION maint_set_config_role(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN PERFORM pg_catalog.set_config('role', SESSION_USER::text, false);
      PERFORM public.maint_done(scope, key, fence, 'set_config role'); END $$;
CREATE FUNCTION maint_session_authorization(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN EXECUTE 'SET SESSION AUTHORIZATION ' || quote_ident(SESSION_USER::text);
      PERFORM public.maint_done(scope, key, fence, 'session authorization'); END $$;
CREATE FUNCTION maint_read_secret(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN PERFORM public.maint_done(scope, key, fence, (SELECT v FROM public.maint_secret)); END $$;
CREATE FUNCTION maint_temp_function(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  EXECUTE 'CREATE FUNCTION pg_temp.maint_trap() RETURNS text LANGUAGE sql AS $f$ SELECT CURRENT_USER::text $f$';
  PERFORM public.maint_done(scope, key, fence, 'left a temp function');
END $$;
CREATE FUNCTION maint_temp_table(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  EXECUTE 'CREATE TEMP TABLE maint_secret (v text)';
  PERFORM public.maint_done(scope, key, fence, 'left a temp table');
END $$;
-- Sets settings for whoever runs next; the next completer reports what it sees.
CREATE FUNCTION maint_set_settings(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM pg_catalog.set_config('maint.planted', 'by the previous completer', false);
  PERFORM pg_catalog.set_config('search_path', 'public', false);
  SET work_mem = '1234kB';
  SET LOCAL statement_timeout = '4321s';
  PERFORM public.maint_done(scope, key, fence, 'set settings');
END $$;
CREATE FUNCTION maint_read_settings(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM public.maint_done(scope, key, fence,
      pg_catalog.concat_ws(', ', pg_catalog.current_setting('maint.planted', true),
                           pg_catalog.current_setting('search_path'),
                           pg_catalog.current_setting('work_mem'),
                           pg_catalog.current_setting('statement_timeout')));
END $$;
-- The way a completer changes a setting in both engines: a SET clause, and
-- SET LOCAL inside (undone when the function returns).
CREATE FUNCTION maint_local_settings(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET statement_timeout = '5s' AS $$
BEGIN
  SET LOCAL statement_timeout = '7s';
  PERFORM public.maint_done(scope, key, fence, pg_catalog.current_setting('statement_timeout'));
END $$;
-- Not SECURITY DEFINER: the C++ engine runs it as its owner; the portable
-- engine cannot, and refuses it (README, the function table).
CREATE FUNCTION maint_invoker(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.maint_done(scope, key, fence, 'invoker'); END $$;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.proname LIKE 'maint\_%' AND p.pronamespace = 'public'::regnamespace LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO idem_maint_owner', f);
  END LOOP;
END $$;

INSERT INTO idem.scope_policy (scope, completer)
SELECT 'c_' || s, 'maint_' || s || '(text, text, bigint, text, integer)'
  FROM unnest(ARRAY['good', 'nothing', 'raise', 'reset_role', 'set_role', 'set_config_role',
                    'session_authorization', 'read_secret', 'temp_function', 'temp_table',
                    'set_settings', 'read_settings', 'local_settings', 'invoker']) AS s;

-- A key of `scope`, abandoned `minutes` ago (due for its completer, in that order).
CREATE FUNCTION pg_temp.abandoned(scope text, minutes int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM idem.claim_idempotency_key(scope, 'k', 'h');
  UPDATE idem.idempotency_request r
     SET status = 'failed_retryable', failure_code = 'abandoned', failure_message = 'test',
         locked_until = NULL, finished_at = now() - minutes * interval '1 minute',
         updated_at = now() - minutes * interval '1 minute'
   WHERE r.scope = abandoned.scope AND r.key = 'k';
END $$;
CREATE FUNCTION pg_temp.outcome(scope text) RETURNS text LANGUAGE sql AS $$
  SELECT concat_ws(' | ', status, attempt_count, claimed_by, response_body->>'ran_as', response_body->>'what')
    FROM idem.idempotency_request r WHERE r.scope = outcome.scope AND r.key = 'k'
$$;

-- The good one runs as its owner and records an outcome.
SELECT pg_temp.abandoned('c_good', 1);
SELECT idem.run_maintenance() AS good;
SELECT pg_temp.outcome('c_good');

SELECT pg_temp.abandoned('c_invoker', 1);
SELECT idem.run_maintenance() AS invoker;
SELECT pg_temp.outcome('c_invoker');

-- One that records nothing, and one that raises: failures, the raise's work
-- undone, the worker's claim kept (the attempt counts).
SELECT pg_temp.abandoned('c_nothing', 2);
SELECT pg_temp.abandoned('c_raise', 1);
SELECT idem.run_maintenance() AS nothing_and_raise;
SELECT pg_temp.outcome('c_nothing') AS nothing, pg_temp.outcome('c_raise') AS raise;

-- No way back to the caller's rights, and none to the extension owner's:
-- each attempt fails alone, its work undone.
SELECT pg_temp.abandoned('c_reset_role', 7);
SELECT pg_temp.abandoned('c_set_role', 6);
SELECT pg_temp.abandoned('c_set_config_role', 5);
SELECT pg_temp.abandoned('c_session_authorization', 4);
SELECT pg_temp.abandoned('c_read_secret', 3);
SELECT pg_temp.abandoned('c_temp_function', 2);
SELECT pg_temp.abandoned('c_temp_table', 1);
SELECT idem.run_maintenance() AS escapes;
SELECT r.scope, pg_temp.outcome(r.scope)
  FROM idem.idempotency_request r
 WHERE r.scope IN ('c_reset_role', 'c_set_role', 'c_set_config_role', 'c_session_authorization',
                   'c_read_secret', 'c_temp_function', 'c_temp_table')
 ORDER BY r.scope;
-- Nothing was left in the caller's temporary schema, and the caller is who it was.
SELECT count(*) AS caller_temp_objects FROM pg_proc WHERE pronamespace = pg_my_temp_schema() AND proname = 'maint_trap';
SELECT to_regclass('pg_temp.maint_secret') AS temp_table_left;
SELECT CURRENT_USER = SESSION_USER AS caller_unchanged;

-- Settings a completer changes reach neither the next one nor the caller:
-- the C++ engine puts them back when it returns; the portable engine, which
-- cannot, undoes a completer that leaves one changed.
SET work_mem = '4MB';
SELECT pg_temp.abandoned('c_set_settings', 3);
SELECT pg_temp.abandoned('c_read_settings', 2);
SELECT pg_temp.abandoned('c_local_settings', 1);
SELECT idem.run_maintenance() AS settings;
SELECT pg_temp.outcome('c_set_settings') AS set_settings, pg_temp.outcome('c_read_settings') AS read_settings;
SELECT pg_temp.outcome('c_local_settings') AS local_settings;
SELECT current_setting('maint.planted', true) AS planted, current_setting('work_mem') AS work_mem,
       current_setting('statement_timeout') AS statement_timeout;
RESET work_mem;

-- A completer whose owner may not execute it is not run.
DELETE FROM idem.idempotency_request WHERE scope = 'c_good';
SELECT pg_temp.abandoned('c_good', 1);
REVOKE EXECUTE ON FUNCTION maint_good(text, text, bigint, text, integer) FROM PUBLIC, idem_maint_owner;
SELECT idem.run_maintenance() AS owner_may_not_execute;
SELECT pg_temp.outcome('c_good');

TRUNCATE idem.idempotency_request;
DELETE FROM idem.scope_policy WHERE scope LIKE 'c\_%';
DROP FUNCTION pg_temp.abandoned(text, int), pg_temp.outcome(text);
DROP TABLE maint_caller_temp, maint_secret;
DROP OWNED BY idem_maint_owner, idem_maint_nobody;
DROP ROLE idem_maint_owner, idem_maint_nobody;
