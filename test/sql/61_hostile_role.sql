-- The adversarial search_path suite (the 1.1 hardening). A hostile role granted
-- EXECUTE on every idem function, USAGE on schema idem and the right to
-- write policies puts its own schema first on its search_path. There it
-- shadows every operator of every type idem's statements touch and the
-- functions idem's SQL calls by name; each shadow returns the right answer
-- but first records that it ran (and as whom) and tries to make the role
-- superuser. The role then calls every SECURITY DEFINER function of idem in
-- every state a key, a message and an event can be in. Nothing it shadowed
-- may ever run: every SECURITY DEFINER function runs under search_path =
-- pg_catalog, pg_temp. The end of the file lists every SECURITY DEFINER
-- function of schema idem and fails for one that is not pinned so, or that
-- this file did not call: a new one cannot be added without being tried here.
-- Since 1.2 it also meets scopes owned by roles: a tenant's
-- scopes refuse it alike for keys that exist and keys that do not, and it
-- gets past that check by no write, setting, role switch, wrapper or
-- temporary object of its own.
\set VERBOSITY terse
SET client_min_messages = warning;

CREATE ROLE idem_hostile61 LOGIN;
CREATE SCHEMA hostile61 AUTHORIZATION idem_hostile61;
GRANT USAGE ON SCHEMA idem TO idem_hostile61;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'idem'::regnamespace LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO idem_hostile61', f);
  END LOOP;
END $$;
GRANT SELECT, INSERT, UPDATE, DELETE ON idem.scope_policy TO idem_hostile61;

-- Every shadow's run: what it shadows, the role it ran as, and whether its
-- ALTER ROLE ... SUPERUSER went through.
CREATE TABLE public.h61_calls (what text, ran_as name, promoted boolean);
GRANT INSERT ON public.h61_calls TO PUBLIC;

-- Runs a statement under the caller's search_path and answers its SQLSTATE
-- ('ok' without error). Its own body resolves no operator and no function.
CREATE FUNCTION public.h61_try(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;

-- Which SECURITY DEFINER functions this file calls: the function statistics
-- (fmgr counts a SECURITY DEFINER function's calls too), from here on.
SET track_functions = 'all';
SELECT pg_stat_force_next_flush();
CREATE TABLE public.h61_calls_before AS
  SELECT funcid, calls FROM pg_stat_user_functions WHERE schemaname = 'idem';

SET ROLE idem_hostile61;

CREATE FUNCTION hostile61.record(what text) RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE promoted boolean := true;
BEGIN
  BEGIN
    EXECUTE 'ALTER ROLE idem_hostile61 SUPERUSER';
  EXCEPTION WHEN insufficient_privilege THEN
    promoted := false;
  END;
  INSERT INTO public.h61_calls VALUES (what, current_user, promoted);
END $$;

-- The types idem's statements touch.
CREATE TABLE hostile61.types (t regtype PRIMARY KEY);
INSERT INTO hostile61.types VALUES
  ('text'), ('bigint'), ('integer'), ('smallint'), ('interval'), ('timestamptz'),
  ('jsonb'), ('boolean'), ('bytea'), ('oid'), ('tid'), ('name'), ('numeric'),
  ('double precision'), ('regclass'), ('regprocedure'), ('text[]'), ('bigint[]'),
  ('tid[]'), ('idem.idempotency_status'), ('idem.claim_kind'), ('idem.outbox_status');

-- Every pg_catalog operator between those types; the polymorphic ones
-- (anyenum, anyarray) for each of idem's enums and arrays. Each shadow has
-- the same signature and answers what the original answers.
CREATE TABLE hostile61.shadowed (kind text, name text, args regtype[]);
DO $$
DECLARE
  o record;
  l regtype;
  r regtype;
  n integer := 0;
  fn text;
BEGIN
  FOR o IN
    SELECT op.oprname, op.oprleft::regtype AS oprleft, op.oprright::regtype AS oprright,
           op.oprresult::regtype AS oprresult, op.oprcode::regproc::text AS code
      FROM pg_catalog.pg_operator op
     WHERE op.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
       AND (op.oprleft OPERATOR(pg_catalog.=) 0
            OR op.oprleft::regtype OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT t FROM hostile61.types))
            OR op.oprleft OPERATOR(pg_catalog.=) ANY ('{anyenum,anyarray}'::regtype[]))
       AND (op.oprright::regtype OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT t FROM hostile61.types))
            OR op.oprright OPERATOR(pg_catalog.=) ANY ('{anyenum,anyarray}'::regtype[]))
       AND op.oprresult NOT IN (SELECT y.oid FROM pg_catalog.pg_type y WHERE y.typtype OPERATOR(pg_catalog.=) 'p')
  LOOP
    FOR l IN
      SELECT t FROM hostile61.types
       WHERE o.oprleft OPERATOR(pg_catalog.=) t
          OR o.oprleft OPERATOR(pg_catalog.=) 'anyenum'::regtype
             AND (SELECT y.typtype FROM pg_catalog.pg_type y WHERE y.oid OPERATOR(pg_catalog.=) t) OPERATOR(pg_catalog.=) 'e'
          OR o.oprleft OPERATOR(pg_catalog.=) 'anyarray'::regtype
             AND (SELECT y.typelem FROM pg_catalog.pg_type y WHERE y.oid OPERATOR(pg_catalog.=) t) OPERATOR(pg_catalog.<>) 0
             AND (SELECT y.typlen FROM pg_catalog.pg_type y WHERE y.oid OPERATOR(pg_catalog.=) t) OPERATOR(pg_catalog.=) -1
      UNION ALL SELECT NULL WHERE o.oprleft OPERATOR(pg_catalog.=) 0
    LOOP
      FOR r IN
        SELECT t FROM hostile61.types
         WHERE o.oprright OPERATOR(pg_catalog.=) t
            OR o.oprright OPERATOR(pg_catalog.=) o.oprleft AND t OPERATOR(pg_catalog.=) l
      LOOP
        n := n OPERATOR(pg_catalog.+) 1;
        fn := pg_catalog.format('hostile61.op_%s', n);
        IF l IS NULL THEN
          EXECUTE pg_catalog.format(
            'CREATE FUNCTION %s(r %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp '
            'AS $f$ BEGIN PERFORM hostile61.record(%L); RETURN %s(r); END $f$',
            fn, r, o.oprresult, pg_catalog.format('operator %s(%s)', o.oprname, r), o.code);
          EXECUTE pg_catalog.format('CREATE OPERATOR hostile61.%s (RIGHTARG = %s, FUNCTION = %s)',
                                    o.oprname, r, fn);
        ELSE
          EXECUTE pg_catalog.format(
            'CREATE FUNCTION %s(l %s, r %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp '
            'AS $f$ BEGIN PERFORM hostile61.record(%L); RETURN %s(l, r); END $f$',
            fn, l, r, o.oprresult, pg_catalog.format('operator %s(%s, %s)', o.oprname, l, r), o.code);
          EXECUTE pg_catalog.format('CREATE OPERATOR hostile61.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
                                    o.oprname, l, r, fn);
        END IF;
        INSERT INTO hostile61.shadowed VALUES ('operator', o.oprname, ARRAY[l, r]);
      END LOOP;
    END LOOP;
  END LOOP;
END $$;

-- Every overload (without pseudo-types) of the functions idem's SQL calls
-- by name, and more that a statement could plausibly call.
DO $$
DECLARE
  f record;
  n integer := 0;
  call text;
BEGIN
  FOR f IN
    SELECT p.proname, p.pronargs, pg_catalog.pg_get_function_arguments(p.oid) AS args,
           pg_catalog.pg_get_function_identity_arguments(p.oid) AS identity,
           p.prorettype::regtype AS result, ARRAY(SELECT pg_catalog.unnest(p.proargtypes::oid[])::regtype) AS types
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
       AND p.prokind OPERATOR(pg_catalog.=) 'f' AND NOT p.proretset
       AND p.provariadic OPERATOR(pg_catalog.=) 0
       AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY[
         'now', 'statement_timestamp', 'clock_timestamp', 'transaction_timestamp', 'timeofday',
         'nextval', 'currval', 'setval', 'length', 'char_length', 'octet_length', 'format',
         'sha256', 'sha224', 'md5', 'encode', 'decode', 'pg_notify', 'current_setting',
         'set_config', 'random', 'power', 'ceil', 'ceiling', 'floor', 'round', 'trunc',
         'make_interval', 'isfinite', 'array_to_string', 'pg_has_role', 'lower', 'upper',
         'substr', 'substring', 'left', 'right', 'jsonb_typeof', 'date_part', 'extract',
         'date_trunc', 'age', 'timezone', 'justify_interval', 'pg_advisory_xact_lock',
         'pg_try_advisory_xact_lock', 'pg_advisory_lock', 'hashtext', 'txid_current',
         'pg_current_xact_id', 'pg_backend_pid', 'abs', 'jsonb_build_array',
         'jsonb_build_object', 'to_jsonb', 'jsonb_object', 'pg_sleep', 'coalesce',
         'greatest', 'least', 'nullif', 'btrim', 'concat', 'replace', 'array_length',
         'cardinality', 'pg_column_size', 'uuid_generate_v4', 'gen_random_uuid',
         'pg_get_function_identity_arguments', 'has_function_privilege', 'session_user'])
       AND NOT EXISTS (SELECT FROM pg_catalog.unnest(p.proargtypes::oid[]) a(t)
                        JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) a.t
                       WHERE y.typtype OPERATOR(pg_catalog.=) 'p')
       AND (p.prorettype OPERATOR(pg_catalog.=) 'void'::regtype
            OR NOT EXISTS (SELECT FROM pg_catalog.pg_type y
                            WHERE y.oid OPERATOR(pg_catalog.=) p.prorettype
                              AND y.typtype OPERATOR(pg_catalog.=) 'p'))
  LOOP
    n := n OPERATOR(pg_catalog.+) 1;
    SELECT pg_catalog.format('pg_catalog.%I(%s)', f.proname,
                             COALESCE(pg_catalog.string_agg(pg_catalog.format('$%s', i), ', '), ''))
      INTO call FROM pg_catalog.generate_series(1, f.pronargs) i;
    EXECUTE pg_catalog.format(
      'CREATE FUNCTION hostile61.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp '
      'AS $f$ BEGIN PERFORM hostile61.record(%L); %s; END $f$',
      f.proname, f.args, f.result, pg_catalog.format('function %s(%s)', f.proname, f.identity),
      CASE WHEN f.result OPERATOR(pg_catalog.=) 'void'::regtype
           THEN 'PERFORM ' OPERATOR(pg_catalog.||) call ELSE 'RETURN ' OPERATOR(pg_catalog.||) call END);
    INSERT INTO hostile61.shadowed VALUES ('function', f.proname, f.types);
  END LOOP;
END $$;
-- The variadic "any" ones, for text arguments.
CREATE FUNCTION hostile61.format(f text, a text) RETURNS text LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM hostile61.record('function format(text, text)'); RETURN pg_catalog.format(f, a); END $$;
CREATE FUNCTION hostile61.format(f text, a text, b text) RETURNS text LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM hostile61.record('function format(text, text, text)'); RETURN pg_catalog.format(f, a, b); END $$;
CREATE FUNCTION hostile61.jsonb_build_array(a text, b text, c text) RETURNS jsonb LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM hostile61.record('function jsonb_build_array(text, text, text)'); RETURN pg_catalog.jsonb_build_array(a, b, c); END $$;
CREATE FUNCTION hostile61.concat(a text, b text) RETURNS text LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM hostile61.record('function concat(text, text)'); RETURN pg_catalog.concat(a, b); END $$;
INSERT INTO hostile61.shadowed VALUES
  ('function', 'format', '{text,text}'), ('function', 'format', '{text,text,text}'),
  ('function', 'jsonb_build_array', '{text,text,text}'), ('function', 'concat', '{text,text}');

-- A completer of the role's own, for the policy writes.
CREATE FUNCTION hostile61.complete(scope text, key text, fence bigint, recovery_point text,
                                   attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;

SET search_path = hostile61, pg_catalog;
-- The shadows are really in effect for the role's own statements.
SELECT 'a'::text = 'b'::text AS shadowed_equality, now() IS NOT NULL AS shadowed_now;
RESET search_path;
RESET ROLE;
SELECT count(*) >= 2 AS shadows_work, bool_and(ran_as = 'idem_hostile61' AND NOT promoted) AS as_the_role
  FROM public.h61_calls;
DELETE FROM public.h61_calls;

-- What must be shadowed at least (rows: missing shadows).
SELECT w.name, w.args FROM (VALUES
  ('=', '{text,text}'), ('<>', '{text,text}'), ('<', '{text,text}'), ('<=', '{text,text}'),
  ('>', '{text,text}'), ('>=', '{text,text}'), ('||', '{text,text}'), ('~~', '{text,text}'),
  ('=', '{bigint,bigint}'), ('<>', '{bigint,bigint}'), ('<', '{bigint,bigint}'),
  ('<=', '{bigint,bigint}'), ('>', '{bigint,bigint}'), ('>=', '{bigint,bigint}'),
  ('+', '{bigint,bigint}'), ('-', '{bigint,bigint}'), ('*', '{bigint,bigint}'),
  ('=', '{integer,integer}'), ('<=', '{integer,integer}'), ('>=', '{integer,integer}'),
  ('+', '{integer,integer}'), ('-', '{integer,integer}'), ('=', '{integer,bigint}'),
  ('=', '{interval,interval}'), ('<', '{interval,interval}'), ('>', '{interval,interval}'),
  ('*', '{interval,"double precision"}'), ('+', '{interval,interval}'),
  ('=', '{"timestamp with time zone","timestamp with time zone"}'),
  ('<=', '{"timestamp with time zone","timestamp with time zone"}'),
  ('>', '{"timestamp with time zone","timestamp with time zone"}'),
  ('+', '{"timestamp with time zone",interval}'), ('-', '{"timestamp with time zone",interval}'),
  ('-', '{"timestamp with time zone","timestamp with time zone"}'),
  ('=', '{jsonb,jsonb}'), ('->', '{jsonb,text}'), ('->>', '{jsonb,text}'), ('@>', '{jsonb,jsonb}'),
  ('=', '{boolean,boolean}'), ('=', '{bytea,bytea}'), ('=', '{oid,oid}'), ('=', '{tid,tid}'),
  ('=', '{text[],text[]}'), ('@>', '{bigint[],bigint[]}'),
  ('=', '{idem.idempotency_status,idem.idempotency_status}'),
  ('<>', '{idem.idempotency_status,idem.idempotency_status}'),
  ('=', '{idem.outbox_status,idem.outbox_status}'), ('<>', '{idem.claim_kind,idem.claim_kind}'),
  ('-', '{NULL,bigint}'),
  ('now', '{}'), ('statement_timestamp', '{}'), ('clock_timestamp', '{}'), ('nextval', '{regclass}'),
  ('length', '{text}'), ('format', '{text}'), ('format', '{text,text}'), ('sha256', '{bytea}'),
  ('encode', '{bytea,text}'), ('pg_notify', '{text,text}'), ('current_setting', '{text,boolean}'),
  ('random', '{}'), ('isfinite', '{interval}'), ('ceil', '{numeric}'), ('pg_has_role', '{name,oid,text}'),
  ('jsonb_build_array', '{text,text,text}'))
  AS w(name, args)
 WHERE NOT EXISTS (SELECT FROM hostile61.shadowed s
                    WHERE s.name = w.name AND s.args::text = w.args::regtype[]::text);

-- The states the calls below need that a client cannot make: locks and
-- expiry in the past. The superuser sets them between the role's calls.
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;

-- ==== the key store: every claim kind, every completion ====
SELECT kind FROM idem.claim_idempotency_key('h61', 'k1', 'h');
SELECT public.h61_try($$SELECT count(*) FROM idem.idempotency_request$$) AS no_table_access;
-- The fence sequences and the jumpers' lock (src/keys/fence.cpp): a role
-- that could lock idem.fence_jump_lock would stall every jump on the node,
-- and one that could set a fence sequence could have fences issued twice.
SELECT public.h61_try($$LOCK TABLE idem.fence_jump_lock IN EXCLUSIVE MODE$$) AS no_jump_lock;
SELECT public.h61_try($$LOCK TABLE idem.fence_jump_lock IN ACCESS SHARE MODE$$) AS no_jump_lock_share;
SELECT public.h61_try($$SELECT pg_catalog.nextval('idem.fence_jump_seq')$$) AS no_lane_draw;
SELECT public.h61_try($$SELECT pg_catalog.setval('idem.fence_jump_seq', 1)$$) AS no_lane_set;
SELECT public.h61_try($$SELECT pg_catalog.setval('idem.fence_seq', 1)$$) AS no_fence_set;
SELECT kind FROM idem.claim_idempotency_key('h61', 'k1', 'h');
SELECT idem.retry_after('h61', c) IS NOT NULL AS retry_after_given
  FROM idem.claim_idempotency_key('h61', 'k1', 'h') c;
SELECT public.h61_try($$SELECT idem.claim_idempotency_key('h61', 'k1', 'other hash')$$) AS mismatch;
SELECT kind, fence AS f2 FROM idem.claim_idempotency_key('h61', 'k2', 'h', 'hostile', '1 minute', '1 day') \gset
SELECT :'kind' AS k2_kind;
SELECT fence AS f3 FROM idem.claim_idempotency_key('h61', 'k3', 'h') \gset
SELECT fence AS f4 FROM idem.claim_idempotency_key('h61', 'k4', 'h') \gset
SELECT fence AS f5 FROM idem.claim_idempotency_key('h61', 'k5', 'h') \gset
SELECT fence AS f6 FROM idem.claim_or_wait('h61', 'k6', 'h', '1 second') \gset
SELECT kind FROM idem.claim_or_wait('h61', 'k6', 'h', '1 millisecond');
SELECT idem.set_recovery_point('h61', 'k2', :f2, 'charged');
SELECT idem.extend_lock('h61', 'k2', :f2, '10 minutes') IS NOT NULL AS extended;
SELECT idem.mark_succeeded('h61', 'k2', :f2, 201, '{"ok": true}', 'order', '61');
SELECT kind, response_code, recovery_point FROM idem.claim_idempotency_key('h61', 'k2', 'h');
SELECT kind FROM idem.claim_or_wait('h61', 'k2', 'h', '1 second');
SELECT public.h61_try(pg_catalog.format($$SELECT idem.mark_succeeded('h61', 'k2', %s, 200)$$, :f2)) AS finished_twice;
SELECT public.h61_try($$SELECT idem.set_recovery_point('h61', 'k2', 1, 'x')$$) AS stale_fence;
SELECT idem.mark_failed('h61', 'k3', :f3, true, 'timeout', 'gateway slow');
SELECT kind, attempt_count FROM idem.claim_idempotency_key('h61', 'k3', 'h');
SELECT idem.mark_failed('h61', 'k4', :f4, false, 'declined', NULL, 402, '{"e": 1}');
SELECT kind, failure_code FROM idem.claim_idempotency_key('h61', 'k4', 'h');
SELECT kind, fence IS NULL AS no_fence FROM idem.mark_succeeded_returning('h61', 'k5', :f5, 200, '{"r": 5}');
SELECT kind FROM idem.stored_answer('h61', 'k5');
SELECT kind FROM idem.mark_failed_returning('h61', 'k6', :f6, false, 'no');
SELECT public.h61_try($$SELECT idem.mark_failed_returning('h61', 'k6', 1, false, 'no')$$) AS stale_fence;
SELECT idem.typical_duration('h61') IS NOT NULL AS typical_known;
-- Bound to this session.
SET idem.bind_lock_to_session = on;
SELECT fence AS f7 FROM idem.claim_idempotency_key('h61', 'k7', 'h') \gset
SELECT fence AS f8 FROM idem.claim_idempotency_key('h61', 'k8', 'h') \gset
RESET idem.bind_lock_to_session;
SELECT fence AS f9 FROM idem.claim_idempotency_key('h61', 'k9', 'h') \gset
RESET search_path;
RESET ROLE;
-- k7's lock ran out, k8's session ended, k9 expired in flight.
UPDATE idem.idempotency_request SET claimed_at = claimed_at - interval '1 hour',
       locked_until = now() - interval '1 second'
 WHERE scope = 'h61' AND key = 'k7';
UPDATE idem.idempotency_request SET bound_session = 42 WHERE scope = 'h61' AND key = 'k8';
UPDATE idem.idempotency_request SET created_at = now() - interval '2 days',
       claimed_at = now() - interval '2 days', expires_at = now() - interval '1 day',
       locked_until = now() - interval '1 second'
 WHERE scope = 'h61' AND key = 'k9';
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT idem.sweep_stale() OPERATOR(pg_catalog.>=) 3 AS swept;
RESET search_path;
RESET ROLE;
SELECT key, status, failure_code FROM idem.idempotency_request
 WHERE scope = 'h61' AND key IN ('k7', 'k8', 'k9') ORDER BY key;
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
-- The owner of an abandoned key may still finish it, or lease it again.
SELECT idem.extend_lock('h61', 'k7', :f7, '1 minute') IS NOT NULL AS relocked;
SELECT idem.mark_succeeded('h61', 'k7', :f7, 200);
-- A retry takes an abandoned key over; an expired key starts afresh.
SELECT kind, attempt_count FROM idem.claim_idempotency_key('h61', 'k8', 'h');
SELECT kind, attempt_count FROM idem.claim_idempotency_key('h61', 'k9', 'h');
-- A lock that ran out: a twin takes the key over (processing_stale).
RESET search_path;
RESET ROLE;
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'
 WHERE scope = 'h61' AND key = 'k1';
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT kind, attempt_count FROM idem.claim_idempotency_key('h61', 'k1', 'h');

-- ==== 1.2: the calls adapters need ====
-- peek reads each kind of key; release gives a key up for its owner only.
SELECT kind, fence IS NULL AS no_fence, response_code FROM idem.peek('h61', 'k2');
SELECT kind, failure_code FROM idem.peek('h61', 'k4');
SELECT kind, fence IS NULL AS no_fence FROM idem.peek('h61', 'k1');
SELECT idem.peek('h61', 'nothing') IS NULL AS absent;
SELECT fence AS f10 FROM idem.claim_idempotency_key('h61', 'k10', 'h') \gset
SELECT idem.release('h61', 'k10', :f10);
SELECT kind FROM idem.claim_idempotency_key('h61', 'k10', 'another body');
SELECT public.h61_try(pg_catalog.format($$SELECT idem.release('h61', 'k10', %s)$$, :f10)) AS stale_fence;
SELECT public.h61_try(pg_catalog.format($$SELECT idem.release('h61', 'k2', %s)$$, :f2)) AS not_owned;
SELECT public.h61_try($$SELECT idem.release('h61', 'k10', NULL)$$) AS null_fence;

-- ==== the operator's tools ====
SELECT status FROM idem.lookup('h61', 'k2');
SELECT status FROM idem.force_expire('h61', 'k2');
SELECT public.h61_try($$SELECT idem.force_expire('h61', 'k1')$$) AS in_flight_needs_force;
SELECT status, failure_code FROM idem.force_expire('h61', 'k1', true);
SELECT kind FROM idem.claim_idempotency_key('h61', 'k1', 'h');
SELECT status FROM idem.evict('h61', 'k3', true);
SELECT status FROM idem.evict('h61', 'k4');
SELECT idem.purge_expired() OPERATOR(pg_catalog.>=) 1 AS purged;
SELECT public.h61_try($$SELECT idem.purge_expired(0)$$) AS bad_batch;
SELECT pg_catalog.jsonb_typeof(idem.run_maintenance()) AS maintained;

-- ==== policies: written by the role, then in force ====
INSERT INTO idem.scope_policy (scope, lock_timeout, retention, max_attempts, completer, completer_delay)
VALUES ('h61p', '2 minutes', '3 days', 1,
        'hostile61.complete(text, text, bigint, text, integer)', '1 hour');
UPDATE idem.scope_policy SET bind_lock_to_session = false
 WHERE scope OPERATOR(pg_catalog.=) 'h61p';
INSERT INTO idem.scope_policy (scope, keep_forever) VALUES ('h61q', true);
SELECT kind, attempt_count FROM idem.claim_idempotency_key('h61p', 'p1', 'h');
SELECT public.h61_try($$INSERT INTO idem.scope_policy (scope, completer)
                 VALUES ('h61r', 'idem.sweep_stale(integer)')$$) AS completer_checked;
SELECT consume_once FROM idem.consume_once('h61q', 'm-forever', 'h');
RESET search_path;
RESET ROLE;
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'
 WHERE scope = 'h61p' AND key = 'p1';
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
-- Its second attempt would pass max_attempts 1: the key ends.
SELECT kind, failure_code FROM idem.claim_idempotency_key('h61p', 'p1', 'h');
DELETE FROM idem.scope_policy WHERE scope OPERATOR(pg_catalog.=) ANY ('{h61p,h61q}'::text[]);

-- ==== the inbox ====
SELECT idem.consume_once('h61', 'm1', 'h') AS new_message;
SELECT idem.consume_once('h61', 'm1', 'h') AS replay;
SELECT public.h61_try($$SELECT idem.consume_once('h61', 'm1', 'other')$$) AS mismatch;
SELECT idem.consume_once('h61', 'm2', 'h', '1 hour') AS new_message;
SELECT idem.set_consumed_result('h61', 'm1', 'order', '61');
SELECT public.h61_try($$SELECT idem.set_consumed_result('h61', 'missing', 'order', '61')$$) AS not_consumed;
RESET search_path;
RESET ROLE;
UPDATE idem.consumed_message SET consumed_at = now() - interval '2 days',
       expires_at = now() - interval '1 day'
 WHERE consumer = 'h61';
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT idem.consume_once('h61', 'm1', 'h') AS expired_is_new;
SELECT idem.purge_consumed() AS purged_messages;

-- ==== the outbox: two events of one aggregate, one of another ====
SELECT idem.outbox_put('h61', 'e1', 'h61_event', '{"n": 1}', 'order', '61') AS e1 \gset
SELECT idem.outbox_put('h61', 'e2', 'h61_event', '{"n": 2}', 'order', '61') AS e2 \gset
SELECT idem.outbox_put('h61', 'e3', 'h61_event', '{"n": 3}', NULL, NULL, '{"h": 1}',
                       '2000-01-01') AS e3 \gset
SELECT public.h61_try($$SELECT idem.outbox_put('h61', 'e1', 'h61_event', '{"n": 9}', 'order', '61')$$)
       AS other_payload;
SELECT idem.outbox_put('h61', 'e1', 'h61_event', '{"n": 1}', 'order', '61') AS e1_again \gset
SELECT key, attempt_count FROM idem.outbox_lease(10, '1 minute', ARRAY['h61_event']) ORDER BY id;
RESET search_path;
RESET ROLE;
SELECT (SELECT lease_fence FROM idem.outbox_event WHERE id = :e1) AS l1,
       (SELECT lease_fence FROM idem.outbox_event WHERE id = :e3) AS l3,
       :e1_again = :e1 AS same_event \gset
SELECT :'same_event' AS put_again_same_event;
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT idem.outbox_failed(:e1, :l1, 'broker down', '0 seconds');
SELECT public.h61_try(pg_catalog.format($$SELECT idem.outbox_published(%s, %s)$$, :e1, :l1)) AS lease_lost;
SELECT public.h61_try(pg_catalog.format($$SELECT idem.outbox_failed(%s, %s, '')$$, :e1, :l1)) AS no_error_given;
SELECT idem.outbox_published(:e3, :l3);
SELECT key, attempt_count FROM idem.outbox_lease(10, '1 minute', ARRAY['h61_event']) ORDER BY id;
RESET search_path;
RESET ROLE;
SELECT lease_fence AS l1 FROM idem.outbox_event WHERE id = :e1 \gset
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT idem.outbox_failed(:e1, :l1, 'broker down again');
RESET search_path;
RESET ROLE;
UPDATE idem.outbox_event SET published_at = now() - interval '30 days' WHERE id = :e3;
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT idem.purge_published() OPERATOR(pg_catalog.>=) 1 AS purged_events;
RESET search_path;
RESET ROLE;

-- ==== 1.2: scopes owned by roles ====
-- Another tenant owns the scopes under v61/ (keys, a message, an event, a
-- policy); the role owns those under o61/. Every call the contract covers
-- must refuse the role on v61/ with one and the same 42501 whether the key
-- exists or not, and run none of the role's shadows; the role must not get
-- past the check by writing idem.scope_owner or a policy, through the
-- tenant's own SECURITY DEFINER function, by objects in pg_temp, by SET, or
-- (as a login of its own, further down) by SET ROLE.
CREATE ROLE idem_tenant61 NOLOGIN;
GRANT USAGE ON SCHEMA idem TO idem_tenant61;
GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval)
  TO idem_tenant61;
INSERT INTO idem.scope_owner VALUES ('v61/', 'idem_tenant61'), ('o61/', 'idem_hostile61');
SELECT fence AS vf1 FROM idem.claim_idempotency_key('v61/a', 'k1', 'h') \gset
SELECT kind FROM idem.mark_succeeded_returning('v61/a', 'k1', :vf1, 200, '{"secret": 1}');
SELECT fence AS vf2 FROM idem.claim_idempotency_key('v61/a', 'k2', 'h') \gset
SELECT idem.consume_once('v61/a', 'm1', 'h') AS consumed;
SELECT idem.outbox_put('v61/a', 'e1', 'v61_event', '{"n": 1}') IS NOT NULL AS put;
INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('v61/p', '1 minute');
-- The tenant's own wrapper: SECURITY DEFINER, owned by the owning role.
CREATE FUNCTION public.h61_tenant_claim(k text) RETURNS idem.claim_kind
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT kind FROM idem.claim_idempotency_key('v61/a', k, 'h') $$;
ALTER FUNCTION public.h61_tenant_claim(text) OWNER TO idem_tenant61;
GRANT EXECUTE ON FUNCTION public.h61_tenant_claim(text) TO idem_hostile61;

-- The role's probes: each call on a key (message, event) that exists and
-- on one that does not, with the whole error (SQLSTATE, message, detail,
-- hint) each answered. Its own body resolves no operator and no function
-- but pg_catalog's, by name.
CREATE TABLE public.h61_probe (call text, present text, absent text);
GRANT INSERT ON public.h61_probe TO idem_hostile61;
CREATE FUNCTION public.h61_error(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  detail text;
  hint text;
BEGIN
  EXECUTE statement;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN pg_catalog.format('%s: %s | %s | %s', SQLSTATE, SQLERRM, detail, hint);
END $$;

SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
-- Its own scopes: the calls work, the two questions answer.
SELECT fence AS of1 FROM idem.claim_idempotency_key('o61/a', 'k1', 'h') \gset
SELECT idem.mark_succeeded('o61/a', 'k1', :of1, 201, '{"mine": true}');
SELECT kind, response_code FROM idem.stored_answer('o61/a', 'k1');
SELECT idem.retry_after('o61/a', c) AS no_retry_after, c.kind
  FROM idem.claim_idempotency_key('o61/a', 'k1', 'h') c;
SELECT idem.typical_duration('o61/a') IS NOT NULL AS typical_known;
SELECT idem.check_scope_owner('o61/a');
SELECT idem.may_use_scope('o61/a') AS own, idem.may_use_scope('v61/a') AS tenants,
       idem.may_use_scope('h61') AS uncovered, idem.may_use_scope(NULL) AS null_scope;
-- The tenant's: every covered call, on what exists and on what does not.
INSERT INTO public.h61_probe VALUES
  ('claim_idempotency_key',
   public.h61_error($$SELECT idem.claim_idempotency_key('v61/a', 'k1', 'h')$$),
   public.h61_error($$SELECT idem.claim_idempotency_key('v61/a', 'nope', 'h')$$)),
  ('claim_idempotency_key, other hash',
   public.h61_error($$SELECT idem.claim_idempotency_key('v61/a', 'k1', 'other')$$),
   public.h61_error($$SELECT idem.claim_idempotency_key('v61/a', 'nope', 'other')$$)),
  ('claim_or_wait',
   public.h61_error($$SELECT idem.claim_or_wait('v61/a', 'k2', 'h', '1 second')$$),
   public.h61_error($$SELECT idem.claim_or_wait('v61/a', 'nope', 'h', '1 second')$$)),
  ('mark_succeeded',
   public.h61_error(pg_catalog.format($$SELECT idem.mark_succeeded('v61/a', 'k2', %s, 200)$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.mark_succeeded('v61/a', 'nope', %s, 200)$$, :vf2))),
  ('mark_failed',
   public.h61_error(pg_catalog.format($$SELECT idem.mark_failed('v61/a', 'k2', %s, true, 'x')$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.mark_failed('v61/a', 'nope', %s, true, 'x')$$, :vf2))),
  ('mark_succeeded_returning',
   public.h61_error(pg_catalog.format($$SELECT idem.mark_succeeded_returning('v61/a', 'k2', %s, 200)$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.mark_succeeded_returning('v61/a', 'nope', %s, 200)$$, :vf2))),
  ('mark_failed_returning',
   public.h61_error(pg_catalog.format($$SELECT idem.mark_failed_returning('v61/a', 'k2', %s, false, 'x')$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.mark_failed_returning('v61/a', 'nope', %s, false, 'x')$$, :vf2))),
  ('set_recovery_point',
   public.h61_error(pg_catalog.format($$SELECT idem.set_recovery_point('v61/a', 'k2', %s, 'p')$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.set_recovery_point('v61/a', 'nope', %s, 'p')$$, :vf2))),
  ('extend_lock',
   public.h61_error(pg_catalog.format($$SELECT idem.extend_lock('v61/a', 'k2', %s, '1 minute')$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.extend_lock('v61/a', 'nope', %s, '1 minute')$$, :vf2))),
  ('release',
   public.h61_error(pg_catalog.format($$SELECT idem.release('v61/a', 'k2', %s)$$, :vf2)),
   public.h61_error(pg_catalog.format($$SELECT idem.release('v61/a', 'nope', %s)$$, :vf2))),
  ('peek',
   public.h61_error($$SELECT * FROM idem.peek('v61/a', 'k1')$$),
   public.h61_error($$SELECT * FROM idem.peek('v61/a', 'nope')$$)),
  ('stored_answer',
   public.h61_error($$SELECT * FROM idem.stored_answer('v61/a', 'k1')$$),
   public.h61_error($$SELECT * FROM idem.stored_answer('v61/a', 'nope')$$)),
  ('retry_after (scope v61/a, v61/b)',
   public.h61_error($$SELECT idem.retry_after('v61/a', NULL::idem.claim)$$),
   public.h61_error($$SELECT idem.retry_after('v61/b', NULL::idem.claim)$$)),
  ('typical_duration (scope v61/a, v61/b)',
   public.h61_error($$SELECT idem.typical_duration('v61/a')$$),
   public.h61_error($$SELECT idem.typical_duration('v61/b')$$)),
  ('check_scope_owner (scope v61/a, v61/b)',
   public.h61_error($$SELECT idem.check_scope_owner('v61/a')$$),
   public.h61_error($$SELECT idem.check_scope_owner('v61/b')$$)),
  ('consume_once',
   public.h61_error($$SELECT idem.consume_once('v61/a', 'm1', 'h')$$),
   public.h61_error($$SELECT idem.consume_once('v61/a', 'nope', 'h')$$)),
  ('set_consumed_result',
   public.h61_error($$SELECT idem.set_consumed_result('v61/a', 'm1', 'order', '61')$$),
   public.h61_error($$SELECT idem.set_consumed_result('v61/a', 'nope', 'order', '61')$$)),
  ('outbox_put',
   public.h61_error($$SELECT idem.outbox_put('v61/a', 'e1', 'v61_event', '{"n": 1}')$$),
   public.h61_error($$SELECT idem.outbox_put('v61/a', 'nope', 'v61_event', '{"n": 1}')$$));
-- A relay of the role leases only events of its scopes.
SELECT idem.outbox_put('o61/a', 'e1', 'v61_event', '{"n": 2}') IS NOT NULL AS put;
SELECT scope, key FROM idem.outbox_lease(10, '1 minute', ARRAY['v61_event']) ORDER BY id;
-- The tenant's own SECURITY DEFINER function runs idem as the session's
-- role, not as the function's owner.
SELECT public.h61_error($$SELECT public.h61_tenant_claim('k1')$$) AS through_tenants_definer;
-- idem.scope_owner is the extension owner's.
SELECT public.h61_try($$SELECT count(*) FROM idem.scope_owner$$) AS read_owners,
       public.h61_try($$INSERT INTO idem.scope_owner VALUES ('', 'idem_hostile61')$$) AS insert_owner,
       public.h61_try($$UPDATE idem.scope_owner SET owner = 'idem_hostile61'$$) AS update_owner,
       public.h61_try($$DELETE FROM idem.scope_owner$$) AS delete_owner,
       public.h61_try($$TRUNCATE idem.scope_owner$$) AS truncate_owner;
-- The tenant's policy: not written, changed, taken, removed; nor is one of
-- the role's moved onto the tenant's scopes.
SELECT public.h61_error($$INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('v61/q', '1 hour')$$)
       AS insert_theirs;
SELECT public.h61_try($$UPDATE idem.scope_policy SET lock_timeout = '1 hour'
                        WHERE scope OPERATOR(pg_catalog.=) 'v61/p'$$) AS update_theirs,
       public.h61_try($$UPDATE idem.scope_policy SET scope = 'o61/taken'
                        WHERE scope OPERATOR(pg_catalog.=) 'v61/p'$$) AS take_theirs,
       public.h61_try($$DELETE FROM idem.scope_policy WHERE scope OPERATOR(pg_catalog.=) 'v61/p'$$)
       AS delete_theirs,
       public.h61_try($$TRUNCATE idem.scope_policy$$) AS truncate_ungranted;
INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('o61/p', '1 hour');
SELECT public.h61_try($$UPDATE idem.scope_policy SET scope = 'v61/r'
                        WHERE scope OPERATOR(pg_catalog.=) 'o61/p'$$) AS move_mine_to_theirs;
RESET search_path;
RESET ROLE;
GRANT TRUNCATE ON idem.scope_policy TO idem_hostile61;
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT public.h61_error($$TRUNCATE idem.scope_policy$$) AS truncate_granted;
DELETE FROM idem.scope_policy WHERE scope OPERATOR(pg_catalog.=) 'o61/p';
RESET search_path;
RESET ROLE;
REVOKE TRUNCATE ON idem.scope_policy FROM idem_hostile61;

-- Every probe was refused alike on what exists and on what does not.
SELECT call, left(present, 5) AS sqlstate,
       replace(present, '"v61/a"', '"v61/b"') = replace(absent, '"v61/a"', '"v61/b"') AS same_answer
  FROM public.h61_probe ORDER BY call;
SELECT present AS refusal FROM public.h61_probe WHERE call = 'claim_idempotency_key';
-- And the tenant's rows are as the tenant left them.
SELECT scope, key, status, response_body, recovery_point,
       key <> 'k2' OR fence = :vf2 AS fence_kept
  FROM idem.idempotency_request WHERE scope LIKE 'v61/%' ORDER BY key;
SELECT consumer, message_id, result_ref_type FROM idem.consumed_message WHERE consumer LIKE 'v61/%';
SELECT scope, key, payload, status, lease_fence IS NULL AS not_leased
  FROM idem.outbox_event WHERE event_type = 'v61_event' ORDER BY scope;
SELECT scope, lock_timeout FROM idem.scope_policy WHERE scope LIKE 'v61/%' OR scope LIKE 'o61/%';

-- With idem.require_scope_owner on, a scope no row covers is refused; a
-- role that is not superuser cannot turn it off. (The portable engine has
-- no registered setting: a session may turn it off for itself unless the
-- database's setting says on, as below; test/portable/expected/61_*.diff.)
SET idem.require_scope_owner = on;
SET ROLE idem_hostile61;
SET search_path = hostile61, pg_catalog;
SELECT public.h61_error($$SELECT idem.claim_idempotency_key('u61', 'k1', 'h')$$) AS uncovered;
SELECT kind FROM idem.claim_idempotency_key('o61/a', 'k1', 'h');
SELECT public.h61_try($$SET idem.require_scope_owner = off$$) AS set_off,
       public.h61_try($$SELECT pg_catalog.set_config('idem.require_scope_owner', 'off', false)$$)
       AS set_config_off,
       public.h61_try($$RESET idem.require_scope_owner$$) AS reset,
       public.h61_try($$ALTER ROLE idem_hostile61 SET idem.require_scope_owner = off$$) AS alter_role;
SELECT public.h61_try($$SELECT idem.claim_idempotency_key('u61', 'k1', 'h')$$) AS still_uncovered;
-- The portable engine's idem.run_completers() and its two helpers (no
-- such functions in the C++ engine: 42883 there) give the role nothing of
-- the tenant's: no key of a scope it may not use, no outcome of one; and
-- run_completers runs nothing after SET ROLE (42501).
SELECT public.h61_try($$SELECT idem.run_completers()$$) AS run_completers,
       public.h61_try($$SELECT * FROM idem.portable_claim_own_completer_keys()$$) AS claim_own_keys,
       public.h61_try($$SELECT idem.portable_completer_outcome('o61/a', 'k1', 1)$$) AS outcome_own,
       public.h61_try($$SELECT idem.portable_completer_outcome('v61/a', 'k1', 1)$$) AS outcome_tenants;
RESET search_path;
RESET ROLE;
RESET idem.require_scope_owner;
RESET track_functions;

-- ==== 1.2: scopes owned by roles, as a login of the role ====
-- (The role above is a superuser session's SET ROLE, which may SET ROLE to
-- anyone.) The function statistics of this session are flushed first: the
-- reconnection ends it. The database's setting turns idem.require_scope_owner
-- on for the role's session.
SELECT pg_stat_force_next_flush();
SELECT current_user AS h61_superuser \gset
ALTER DATABASE :"DBNAME" SET idem.require_scope_owner = on;
\c - idem_hostile61
SET client_min_messages = warning;
SET search_path = hostile61, pg_catalog;
CREATE FUNCTION hostile61.as_tenant() RETURNS idem.claim_kind LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  SET ROLE idem_tenant61;
  RETURN (SELECT kind FROM idem.claim_idempotency_key('v61/a', 'k1', 'h'));
END $$;
CREATE FUNCTION hostile61.own_definer() RETURNS idem.claim_kind LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT kind FROM idem.claim_idempotency_key('v61/a', 'k1', 'h') $$;
SELECT public.h61_try($$SET ROLE idem_tenant61$$) AS set_role,
       public.h61_try($$SELECT pg_catalog.set_config('role', 'idem_tenant61', false)$$) AS set_config_role,
       public.h61_try($$SET SESSION AUTHORIZATION idem_tenant61$$) AS session_authorization,
       public.h61_try($$SELECT hostile61.as_tenant()$$) AS set_role_in_definer,
       public.h61_try($$SELECT hostile61.own_definer()$$) AS own_definer,
       public.h61_try($$SELECT public.h61_tenant_claim('k1')$$) AS tenants_definer;
-- Tables, functions and operators of its own in pg_temp, first on the path.
CREATE TEMP TABLE scope_owner (scope_prefix text, owner regrole);
INSERT INTO pg_temp.scope_owner VALUES ('', 'idem_hostile61'), ('v61/', 'idem_hostile61');
CREATE TEMP TABLE scope_policy (scope text, lock_timeout interval);
CREATE TEMP TABLE idempotency_request (scope text, key text, status text, response_body jsonb);
CREATE FUNCTION pg_temp.pg_has_role(name, oid, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM hostile61.record('pg_temp function pg_has_role(name, oid, text)'); RETURN true; END $$;
CREATE FUNCTION pg_temp.texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM hostile61.record('pg_temp operator =(text, text)'); RETURN true; END $$;
CREATE OPERATOR pg_temp.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_temp.texteq);
SET search_path = pg_temp, hostile61, pg_catalog;
SELECT idem.may_use_scope('v61/a') AS tenants, idem.may_use_scope('o61/a') AS own;
SELECT public.h61_try($$SELECT idem.check_scope_owner('v61/a')$$) AS check_tenants,
       public.h61_try($$SELECT idem.claim_idempotency_key('v61/a', 'k1', 'h')$$) AS claim_tenants,
       public.h61_try($$SELECT * FROM idem.stored_answer('v61/a', 'k1')$$) AS stored_answer_tenants,
       public.h61_try($$SELECT idem.typical_duration('v61/a')$$) AS typical_duration_tenants;
-- The database's setting holds for the role's session: not turned off,
-- in either engine.
SELECT public.h61_error($$SELECT idem.claim_idempotency_key('u61', 'k1', 'h')$$) AS uncovered;
SELECT public.h61_try($$SET idem.require_scope_owner = off$$) AS set_off;
SELECT public.h61_try($$SELECT idem.claim_idempotency_key('u61', 'k1', 'h')$$) AS still_uncovered;
SELECT kind FROM idem.claim_idempotency_key('o61/a', 'k1', 'h');
\c - :h61_superuser
SET client_min_messages = warning;
ALTER DATABASE :"DBNAME" RESET idem.require_scope_owner;

-- ==== relations and types shadowed too ====
-- The C++ engine's functions run without a pinned search_path (their
-- statements are proven qualified, src/pg/statement_proof.cpp): the role
-- also shadows every relation of idem with a view, and the types idem's
-- statements name with domains, in its schema and in pg_temp, ahead of
-- pg_catalog, then calls every function again. A view or domain used would
-- record (or break the call).
SET ROLE idem_hostile61;
CREATE FUNCTION hostile61.noted(what text) RETURNS boolean LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM hostile61.record(what); RETURN true; END $$;
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT c.relname FROM pg_catalog.pg_class c
            WHERE c.relnamespace OPERATOR(pg_catalog.=) 'idem'::regnamespace
              AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,v,S,p}'::"char"[])
  LOOP
    EXECUTE pg_catalog.format('CREATE VIEW hostile61.%I AS SELECT hostile61.noted(%L) AS spied',
                              r.relname, 'relation ' OPERATOR(pg_catalog.||) r.relname);
  END LOOP;
  FOR r IN SELECT t FROM pg_catalog.unnest('{text,timestamptz,interval,jsonb,int8,int4,oid,bool}'::text[]) t
  LOOP
    EXECUTE pg_catalog.format('CREATE DOMAIN hostile61.%I AS pg_catalog.%I CHECK (hostile61.noted(%L))',
                              r.t, r.t, 'type ' OPERATOR(pg_catalog.||) r.t);
  END LOOP;
END $$;
CREATE TEMP VIEW idempotency_request AS SELECT hostile61.noted('pg_temp relation') AS spied;
SET search_path = pg_temp, hostile61, pg_catalog;
-- The shadows are in effect for the role's own statements.
SELECT 'x'::text AS shadowed_text_type, (SELECT count(*) FROM idempotency_request) AS shadowed_relation;
RESET ROLE;
SELECT count(*) AS shadows_ran FROM public.h61_calls;
DELETE FROM public.h61_calls;
SET ROLE idem_hostile61;
SELECT kind, fence AS x1 FROM idem.claim_idempotency_key('o61/x', 'k1', 'h') \gset
SELECT :'kind' AS x1_kind;
SELECT idem.set_recovery_point('o61/x', 'k1', :x1, 'charged');
SELECT idem.extend_lock('o61/x', 'k1', :x1, '10 minutes') IS NOT NULL AS extended;
SELECT idem.mark_succeeded('o61/x', 'k1', :x1, 201, '{"ok": true}', 'order', '61');
SELECT kind, response_code FROM idem.claim_idempotency_key('o61/x', 'k1', 'h');
SELECT kind FROM idem.claim_or_wait('o61/x', 'k1', 'h', '1 second');
SELECT status FROM idem.lookup('o61/x', 'k1');
SELECT kind FROM idem.peek('o61/x', 'k1');
SELECT fence AS x2 FROM idem.claim_idempotency_key('o61/x', 'k2', 'h') \gset
SELECT idem.mark_failed('o61/x', 'k2', :x2, true, 'timeout');
SELECT fence AS x3 FROM idem.claim_idempotency_key('o61/x', 'k3', 'h') \gset
SELECT kind FROM idem.mark_succeeded_returning('o61/x', 'k3', :x3, 200, '{"r": 3}');
SELECT fence AS x4 FROM idem.claim_idempotency_key('o61/x', 'k4', 'h') \gset
SELECT kind FROM idem.mark_failed_returning('o61/x', 'k4', :x4, false, 'no');
SELECT fence AS x5 FROM idem.claim_idempotency_key('o61/x', 'k5', 'h') \gset
SELECT idem.release('o61/x', 'k5', :x5);
SELECT status FROM idem.force_expire('o61/x', 'k1');
SELECT status FROM idem.evict('o61/x', 'k2');
SELECT idem.typical_duration('o61/x') IS NOT NULL AS typical_known;
SELECT idem.sweep_stale() OPERATOR(pg_catalog.>=) 0 AS swept, idem.purge_expired() OPERATOR(pg_catalog.>=) 0 AS purged;
SELECT idem.consume_once('o61/x', 'm1', 'h') AS new_message;
SELECT idem.consume_once('o61/x', 'm1', 'h') AS replay;
SELECT idem.set_consumed_result('o61/x', 'm1', 'order', '61');
SELECT idem.outbox_put('o61/x', 'e1', 'o61_event', '{"n": 1}') IS NOT NULL AS put;
SELECT id AS xe, lease_fence AS xf FROM idem.outbox_lease(1, '1 minute', ARRAY['o61_event']) \gset
SELECT idem.outbox_published(:xe, :xf);
SELECT idem.may_use_scope('o61/x') AS may_use;
SELECT public.h61_try($$SELECT idem.check_scope_owner('o61/x')$$) AS check_owner;
-- Every statement of the C++ engine is proven or runs only pinned; the
-- portable engine has no kept statements (and pins every function).
SELECT count(*) AS refused FROM idem.search_path_proof() WHERE verdict OPERATOR(pg_catalog.=) 'refused';
RESET search_path;
RESET ROLE;

-- ==== nothing the role shadowed ever ran, and it gained nothing ====
SELECT what, ran_as, promoted FROM public.h61_calls ORDER BY what;
SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = 'idem_hostile61';
-- The tables are as the calls left them.
SELECT key, status, attempt_count, recovery_point, failure_code, claimed_by,
       bound_session IS NOT NULL AS bound
  FROM idem.idempotency_request WHERE scope LIKE 'h61%' ORDER BY scope, key;
SELECT consumer, message_id, result_ref_type FROM idem.consumed_message
 WHERE consumer LIKE 'h61%' ORDER BY consumer, message_id;
SELECT key, status, attempt_count, last_error, lease_fence IS NOT NULL AS leased
  FROM idem.outbox_event WHERE scope = 'h61' ORDER BY id;
SELECT count(*) AS policies_left FROM idem.scope_policy WHERE scope LIKE 'h61%';

-- ==== every SECURITY DEFINER function: pinned, and called above ====
-- (a) Neither pinned to exactly search_path = pg_catalog, pg_temp nor
-- proven (rows: bugs). Proven: a function of idem's library, every one of
-- whose statements is proven qualified before it is prepared, or runs only
-- under the pin (idem.search_path_proof(), src/pg/statement_proof.cpp).
SELECT p.oid::regprocedure AS neither_pinned_nor_proven, p.proconfig
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef
   AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']
   AND NOT (p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
            AND p.probin = '$libdir/idem' AND p.proconfig IS NULL
            AND NOT EXISTS (SELECT FROM idem.search_path_proof() v WHERE v.verdict = 'refused'));
-- (b) Not called by the hostile role above (rows: add it to this file).
SELECT pg_stat_force_next_flush();
SELECT p.oid::regprocedure AS not_called
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef
   AND COALESCE((SELECT s.calls FROM pg_stat_user_functions s WHERE s.funcid = p.oid), 0)
       <= COALESCE((SELECT b.calls FROM public.h61_calls_before b WHERE b.funcid = p.oid), 0)
 ORDER BY p.oid::regprocedure::text;
SELECT count(*) >= 23 AS definers_counted FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef;

-- Clean up.
ALTER ROLE idem_hostile61 NOSUPERUSER;
DELETE FROM idem.scope_owner WHERE scope_prefix IN ('v61/', 'o61/');
DELETE FROM idem.idempotency_request WHERE scope LIKE 'v61/%' OR scope LIKE 'o61/%' OR scope = 'u61';
DELETE FROM idem.consumed_message WHERE consumer LIKE 'v61/%';
DELETE FROM idem.outbox_event WHERE event_type = 'v61_event';
DELETE FROM idem.scope_policy WHERE scope LIKE 'v61/%' OR scope LIKE 'o61/%';
DROP TABLE public.h61_probe;
DROP FUNCTION public.h61_error(text), public.h61_tenant_claim(text);
DELETE FROM idem.idempotency_request WHERE scope LIKE 'h61%';
DELETE FROM idem.consumed_message WHERE consumer LIKE 'h61%';
DELETE FROM idem.outbox_event WHERE scope = 'h61';
DROP TABLE public.h61_calls, public.h61_calls_before;
DROP FUNCTION public.h61_try(text);
DROP SCHEMA hostile61 CASCADE;
DROP OWNED BY idem_hostile61, idem_tenant61;
DROP ROLE idem_hostile61, idem_tenant61;
RESET client_min_messages;
