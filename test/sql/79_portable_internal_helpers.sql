-- What runs without a pinned search_path, tried by a hostile role (both
-- engines; portable/build.pl's "unpinned" rule). The portable engine's
-- row check, idem.request_invariants_hold(idem.idempotency_request), runs
-- at every write of the key table without SET search_path (a pinned path
-- costs a settings save and restore per call). So a role puts its own
-- schema before pg_catalog and shadows every operator the row rules
-- compare with, and char_length: each shadow says "true" and records that
-- it ran. Its bad rows must still be refused with 23514 naming the rule,
-- by a call and through the table's CHECK, and no shadow may run. Then:
-- the portable engine's internal helpers (idem.portable_*) are not
-- executable by such a role, and no function of schema idem is SECURITY
-- DEFINER without search_path pinned.
\set VERBOSITY terse
SET client_min_messages = warning;

CREATE ROLE idem_hostile79 LOGIN;
CREATE SCHEMA hostile79 AUTHORIZATION idem_hostile79;
GRANT USAGE ON SCHEMA idem TO idem_hostile79;
CREATE TABLE public.h79_calls (what text);
GRANT INSERT ON public.h79_calls TO PUBLIC;

-- A key the role will try to break by hand.
SELECT kind FROM idem.claim_idempotency_key('h79', 'k', 'h');

SET ROLE idem_hostile79;
SET search_path = hostile79, pg_catalog;
DO $$
DECLARE
  shadow text[];
BEGIN
  FOREACH shadow SLICE 1 IN ARRAY ARRAY[
      ['>=', 'integer', 'integer'], ['<=', 'integer', 'integer'], ['>', 'integer', 'integer'],
      ['>', 'bigint', 'integer'], ['<>', 'text', 'text'], ['=', 'text', 'text'],
      ['>', 'timestamp with time zone', 'timestamp with time zone'],
      ['=', 'idem.idempotency_status', 'idem.idempotency_status'],
      ['<>', 'idem.idempotency_status', 'idem.idempotency_status']] LOOP
    EXECUTE pg_catalog.format(
      'CREATE FUNCTION hostile79.%s(%s, %s) RETURNS boolean LANGUAGE sql AS %L',
      'yes_' || pg_catalog.md5(pg_catalog.array_to_string(shadow, ' ')), shadow[2], shadow[3],
      pg_catalog.format('INSERT INTO public.h79_calls VALUES (%L) RETURNING true',
                        pg_catalog.array_to_string(shadow, ' ')));
    EXECUTE pg_catalog.format('CREATE OPERATOR hostile79.%s (FUNCTION = hostile79.%s, LEFTARG = %s, RIGHTARG = %s)',
      shadow[1], 'yes_' || pg_catalog.md5(pg_catalog.array_to_string(shadow, ' ')), shadow[2], shadow[3]);
  END LOOP;
END $$;
CREATE FUNCTION hostile79.char_length(text) RETURNS integer LANGUAGE sql
  AS $$ INSERT INTO public.h79_calls VALUES ('char_length') RETURNING 100 $$;

-- A row that keeps the rules, then one broken rule at a time.
CREATE TEMP TABLE h79_rows AS
SELECT pg_catalog.jsonb_populate_record(NULL::idem.idempotency_request,
         '{"scope": "s", "key": "k", "request_hash": "h", "status": "processing",
           "recovery_point": "started", "fence": 7, "attempt_count": 1,
           "claimed_at": "2026-01-01", "locked_until": "2026-01-02",
           "created_at": "2026-01-01", "updated_at": "2026-01-01",
           "expires_at": "2026-01-03"}'::jsonb) AS good;
SELECT idem.request_invariants_hold(good) AS keeps_the_rules FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"scope": ""}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"fence": 0}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"attempt_count": 0}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"request_hash": ""}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"response_code": 700}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"expires_at": "2025-01-01"}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good, '{"recovery_point": "finished"}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good,
         '{"status": "succeeded", "recovery_point": "finished", "locked_until": null,
           "finished_at": "2026-01-01"}')) FROM h79_rows;
SELECT idem.request_invariants_hold(pg_catalog.jsonb_populate_record(good,
         '{"status": "failed_final", "locked_until": null, "finished_at": "2026-01-01",
           "failure_code": ""}')) FROM h79_rows;
RESET ROLE;

-- Through the CHECK: the role may write the key table (an operator's grant)
-- and still cannot store a broken row under its search_path.
GRANT SELECT, UPDATE ON idem.idempotency_request TO idem_hostile79;
SET ROLE idem_hostile79;
SET search_path = hostile79, pg_catalog;
UPDATE idem.idempotency_request SET fence = 0 WHERE scope OPERATOR(pg_catalog.=) 'h79';
UPDATE idem.idempotency_request SET locked_until = NULL WHERE scope OPERATOR(pg_catalog.=) 'h79';
UPDATE idem.idempotency_request SET status = 'succeeded' WHERE scope OPERATOR(pg_catalog.=) 'h79';
RESET ROLE;
RESET search_path;
REVOKE SELECT, UPDATE ON idem.idempotency_request FROM idem_hostile79;

-- No shadow ran.
SELECT pg_catalog.count(*) AS shadows_run FROM public.h79_calls;

-- The portable engine's internal helpers are not the role's to call; none
-- exists in the C++ engine. PUBLIC's by design: only request_hash's
-- canonical-JSON helpers portable_jcs* (pure; request_hash runs with its
-- caller's rights).
SELECT coalesce(string_agg(p.oid::regprocedure::text, ', '), 'none') AS helpers_the_role_may_call
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.proname LIKE 'portable\_%'
   AND p.proname NOT LIKE 'portable\_jcs%'
   AND has_function_privilege('idem_hostile79', p.oid, 'EXECUTE');
SET ROLE idem_hostile79;
DO $$
BEGIN
  PERFORM idem.portable_claim_once('h79', 'k', 'h', NULL, interval '1 second', NULL, 0, NULL);
  RAISE NOTICE 'called';
EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
  RAISE WARNING 'portable_claim_once refused';
END $$;
RESET ROLE;

-- Every SECURITY DEFINER function of schema idem runs under the pinned
-- search_path; what runs unpinned runs with its caller's rights.
SELECT coalesce(string_agg(p.oid::regprocedure::text, ', '), 'none') AS definers_not_pinned
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef
   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
   AND NOT (p.proconfig IS NULL AND p.probin = '$libdir/idem');  -- proven (61_hostile_role)

DELETE FROM idem.idempotency_request WHERE scope = 'h79';
DROP TABLE public.h79_calls;
DROP SCHEMA hostile79 CASCADE;
DROP OWNED BY idem_hostile79;
DROP ROLE idem_hostile79;
