-- The adversarial search_path suite (issue #27). A hostile role granted
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
RESET track_functions;

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
-- (a) Not pinned to exactly search_path = pg_catalog, pg_temp (rows: bugs).
SELECT p.oid::regprocedure AS not_pinned, p.proconfig
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef
   AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp'];
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
DELETE FROM idem.idempotency_request WHERE scope LIKE 'h61%';
DELETE FROM idem.consumed_message WHERE consumer LIKE 'h61%';
DELETE FROM idem.outbox_event WHERE scope = 'h61';
DROP TABLE public.h61_calls, public.h61_calls_before;
DROP FUNCTION public.h61_try(text);
DROP SCHEMA hostile61 CASCADE;
DROP OWNED BY idem_hostile61;
DROP ROLE idem_hostile61;
RESET client_min_messages;
