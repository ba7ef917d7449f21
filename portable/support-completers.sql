-- The completers idem.run_maintenance runs: the C++ engine's in-call
-- completer (src/worker/completer_call.cpp) and its worker's completer
-- statements (src/pure/policy_statements.def), in PL/pgSQL. Each helper
-- runs as the extension's owner, called from a SECURITY DEFINER body.
-- Below them, idem.run_completers(), by which another role runs the
-- completers it owns.

-- The OID of the function a policy names as its completer: 0 when the
-- name resolves to no function any more, NULL when it cannot be resolved
-- at all. to_regprocedure raises (42501) when the extension's owner may not
-- use the function's schema, which the schema's owner, a tenant, may
-- revoke: caught here, for that one name, so that one tenant's schema does
-- not stop the completers of every other. quiet: no WARNING
-- (the second look of the same call).
CREATE FUNCTION idem.portable_resolve_completer(completer text, quiet boolean)
RETURNS oid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    state text;
    message text;
BEGIN
    RETURN COALESCE(to_regprocedure(completer)::oid, '0'::oid);
EXCEPTION WHEN OTHERS THEN
    IF NOT quiet THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
        RAISE WARNING 'idem completer "%" cannot be resolved: %', completer, message
            USING DETAIL = format('SQLSTATE %s. The due keys of the scopes that name it are skipped; '
                                  'the other scopes'' completers run.', state),
                  HINT = 'The extension''s owner must be able to look the function up: USAGE on its '
                         'schema and on the schemas of its argument types.';
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_resolve_completer(text, boolean) FROM PUBLIC;

-- The keys due for their scope's completer (the worker's
-- completer_candidates), with the function the policy names (0 when the
-- name resolves to no function any more) and its owner, and since when the
-- key is due (oldest first). Each name is resolved once; a key whose name
-- cannot be resolved is left out (idem.portable_resolve_completer). The
-- keys are read from the relations idem.portable_local_relations gives
-- (the table, or this Citus node's shards of it: none on the coordinator),
-- in one statement; the policies are read first and passed as arrays, as
-- a statement on a shard does not join the reference table.
CREATE FUNCTION idem.portable_completer_due(now timestamptz, quiet boolean)
RETURNS TABLE (scope text, key text, request_hash text, completer oid, owner oid, since timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    scopes text[];
    names text[];
    delays interval[];
    keys_sql text;
BEGIN
    SELECT array_agg(p.scope), array_agg(p.completer), array_agg(p.completer_delay)
      INTO scopes, names, delays
      FROM idem.scope_policy p
     WHERE p.completer IS NOT NULL;
    SELECT string_agg(format('SELECT r.scope, r.key, r.request_hash, r.status, r.failure_code, r.locked_until,
                                     r.updated_at, r.expires_at FROM %s r', l.relation), ' UNION ALL ')
      INTO keys_sql
      FROM idem.portable_local_relations('idem.idempotency_request'::regclass) AS l(relation);
    IF scopes IS NULL OR keys_sql IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
       'WITH due AS MATERIALIZED (
            SELECT r.scope, r.key, r.request_hash, p.name,
                   COALESCE(r.locked_until, r.updated_at) AS since
              FROM unnest($3::text[], $4::text[], $5::interval[]) AS p(scope, name, delay)
              JOIN (%s) r ON r.scope = p.scope
             WHERE (r.status = ''processing'' AND r.locked_until <= $1
                    OR r.status = ''failed_retryable'' AND r.failure_code = ''abandoned'')
               AND r.expires_at > $1
               AND COALESCE(r.locked_until, r.updated_at) <= $1 - COALESCE(p.delay, ''0''::interval)),
        named AS MATERIALIZED (
            SELECT n.name, idem.portable_resolve_completer(n.name, $2) AS completer
              FROM (SELECT DISTINCT due.name FROM due) n)
        SELECT due.scope, due.key, due.request_hash, named.completer, f.proowner, due.since
          FROM due
          JOIN named ON named.name = due.name
          LEFT JOIN pg_catalog.pg_proc f ON f.oid = named.completer
         WHERE named.completer IS NOT NULL', keys_sql)
      USING now, quiet, scopes, names, delays;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_completer_due(timestamptz, boolean) FROM PUBLIC;

-- Why a completer may not run in a call made as role runner, or NULL.
-- The C++ engine runs a completer as its owner with SetUserIdAndSecContext.
-- SQL has no such call, and no check of prosecdef can stand in for it: an
-- owner may flip its function between SECURITY INVOKER and DEFINER (ALTER
-- FUNCTION and CREATE OR REPLACE take no lock) between the check and the
-- call, and an INVOKER completer then runs as the caller (a flip test: 20 of
-- 300 runs as the extension's owner). So the portable engine calls a
-- completer only where the role the call runs as IS its owner: then it runs
-- as its owner whether it is INVOKER or DEFINER, and a flip changes
-- nothing. idem.run_maintenance runs as the extension's owner, so it runs
-- the completers that role owns; idem.run_completers runs, as its caller,
-- the completers its caller owns. What is checked stays what runs: only
-- the owner (or a superuser) may give the function away, rename it or move
-- it, and the schema it is called in (by name: SQL calls no function by
-- OID) must be one no other role may rename or drop: owned by the runner,
-- by a superuser, or pg_database_owner where the runner owns the database.
CREATE FUNCTION idem.portable_completer_refusal(completer oid, runner oid)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    SELECT p.proowner, a.rolname, p.pronamespace, n.nspname, n.nspowner, s.rolname AS nspowner_name,
           s.rolsuper AS nspowner_super
      INTO f
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
      LEFT JOIN pg_catalog.pg_roles a ON a.oid = p.proowner
      LEFT JOIN pg_catalog.pg_roles s ON s.oid = n.nspowner
     WHERE p.oid = completer;
    IF NOT FOUND THEN
        RETURN 'The function no longer exists.';
    END IF;
    IF f.rolname IS NULL THEN
        RETURN 'Its owner no longer exists.';
    END IF;
    IF f.proowner <> runner THEN
        RETURN format('Its owner is role "%s", and this call runs as role "%s": the portable engine runs '
                      'a completer only in a call made as its owner (idem.run_maintenance() for the '
                      'extension''s owner, idem.run_completers() for any other owner).',
                      f.rolname, pg_get_userbyid(runner));
    END IF;
    IF NOT has_function_privilege(f.proowner, completer, 'EXECUTE') THEN
        RETURN format('Its owner, role "%s", may not execute it.', f.rolname);
    END IF;
    IF NOT has_schema_privilege(f.proowner, f.pronamespace, 'USAGE') THEN
        RETURN format('Its owner, role "%s", may not use its schema "%s".', f.rolname, f.nspname);
    END IF;
    IF NOT (f.nspowner = runner OR coalesce(f.nspowner_super, false)
            OR f.nspowner = 'pg_database_owner'::regrole
               AND runner = (SELECT d.datdba FROM pg_catalog.pg_database d
                              WHERE d.datname = current_database())) THEN
        RETURN format('Its schema "%s" is owned by role "%s", which could rename it and put another '
                      'function under the completer''s name: the portable engine calls a completer by '
                      'name only in a schema of its owner''s (or of a superuser).',
                      f.nspname, coalesce(f.nspowner_name, f.nspowner::text));
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_completer_refusal(oid, oid) FROM PUBLIC;

-- The call of a completer by its schema's and its own name, read from its
-- OID (portable_completer_refusal says why the name stays the OID's).
CREATE FUNCTION idem.portable_completer_call(completer oid)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT format('SELECT %I.%I($1, $2, $3, $4, $5)', n.nspname, p.proname)
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE p.oid = $1
$$;
REVOKE ALL ON FUNCTION idem.portable_completer_call(oid) FROM PUBLIC;

-- Every object in this session's temporary schema (the C++ engine's
-- session_temp_objects statement).
CREATE FUNCTION idem.portable_session_temp_objects()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
WITH temp_object AS (
    SELECT concat('pg_class ', c.oid) AS id FROM pg_catalog.pg_class c WHERE c.relnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_proc ', p.oid) FROM pg_catalog.pg_proc p WHERE p.pronamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_type ', t.oid) FROM pg_catalog.pg_type t WHERE t.typnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_operator ', o.oid) FROM pg_catalog.pg_operator o WHERE o.oprnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_collation ', l.oid) FROM pg_catalog.pg_collation l WHERE l.collnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_conversion ', v.oid) FROM pg_catalog.pg_conversion v WHERE v.connamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_opfamily ', f.oid) FROM pg_catalog.pg_opfamily f WHERE f.opfnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_ts_config ', g.oid) FROM pg_catalog.pg_ts_config g WHERE g.cfgnamespace = pg_my_temp_schema()
    UNION ALL SELECT concat('pg_ts_dict ', d.oid) FROM pg_catalog.pg_ts_dict d WHERE d.dictnamespace = pg_my_temp_schema())
SELECT COALESCE(string_agg(temp_object.id, ' ' ORDER BY temp_object.id), '') FROM temp_object
$$;
REVOKE ALL ON FUNCTION idem.portable_session_temp_objects() FROM PUBLIC;

-- The session's settings as a completer could leave them for the next one
-- and for the caller: every setting pg_settings shows, and idem's own (custom
-- settings without the library, which pg_settings does not show). The C++
-- engine gives each completer its own level of settings and undoes it; SQL
-- cannot, so a completer that leaves one of these changed is undone instead.
-- Other custom settings (a.b) are invisible to SQL: README says so. Its own
-- SET clause hides search_path, which the caller reads itself.
CREATE FUNCTION idem.portable_session_settings()
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT COALESCE(jsonb_object_agg(s.name, s.setting), '{}'::jsonb)
  FROM (SELECT g.name, g.setting FROM pg_catalog.pg_settings g
        UNION ALL
        SELECT n.name, current_setting(n.name, true)
          FROM unnest(ARRAY['idem.lock_timeout', 'idem.retention', 'idem.bind_lock_to_session',
                            'idem.batch_size', 'idem.inbox_retention', 'idem.outbox_retention',
                            'idem.outbox_max_attempts', 'idem.outbox_backoff_base',
                            'idem.outbox_backoff_max', 'idem.require_scope_owner']) AS n(name)) s
$$;
REVOKE ALL ON FUNCTION idem.portable_session_settings() FROM PUBLIC;

-- One due key of a completer the extension's owner owns (run_maintenance):
-- the call's own claim, then the completer in a subtransaction (an
-- EXCEPTION block), undone alone when it raises, with any SQLSTATE, or
-- leaves a temporary object or a setting behind. Returns 'not_owned',
-- 'succeeded', 'failed', or 'canceled' when the completer ended with
-- query_canceled (57014: raised by it, or the call's statement_timeout or a
-- cancel), after which the call runs no more completers.
CREATE FUNCTION idem.portable_run_completer(scope text, key text, request_hash text, completer oid)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c idem.claim;
    policy record;
    reason text;
    fname text;
    call text;
    temp_before text;
    temp_after text;
    settings_before jsonb;
    path_before text;
    changed text;
    state text;
    message text;
    outcome record;
BEGIN
    -- claim_idempotency_key's general claim without its owner check:
    -- run_maintenance is an operator's call, which scopes' owners do not
    -- cover (the completer's own calls are checked as any other).
    policy := idem.portable_claim_policy(scope, key, NULL, NULL);
    c := idem.portable_claim_once(scope, key, request_hash, 'idem completer', policy.lock_timeout,
                                  policy.retention, policy.max_attempts,
                                  CASE WHEN policy.bind THEN idem.portable_session_token() END);
    IF c.fence IS NULL OR c.kind IN ('replay_success', 'final_failure', 'processing_active') THEN
        RETURN 'not_owned';
    END IF;
    reason := idem.portable_completer_refusal(completer, (SELECT a.oid FROM pg_catalog.pg_roles a
                                                           WHERE a.rolname = current_user));
    IF reason IS NOT NULL THEN
        RAISE WARNING 'idem completer % for scope "%", key "%" cannot be run',
            CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.oid = completer)
                 THEN completer::regprocedure::text ELSE completer::text END, scope, key
            USING DETAIL = reason,
                  HINT = 'Fix the completer of the scope in idem.scope_policy, or its owner; the key '
                         'stays claimed until its lock runs out, then a later round tries again.';
        RETURN 'failed';
    END IF;
    fname := completer::regprocedure::text;
    call := idem.portable_completer_call(completer);
    settings_before := idem.portable_session_settings();
    path_before := current_setting('search_path');
    BEGIN
        -- The completer's calls are judged as its owner's, as in the
        -- process the C++ engine's worker starts for it (scope owners,
        -- idem.portable_judged_role below); undone with the block.
        PERFORM idem.portable_judge_as((SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = completer));
        temp_before := idem.portable_session_temp_objects();
        EXECUTE call USING scope, key, c.fence, c.recovery_point, c.attempt_count;
        temp_after := idem.portable_session_temp_objects();
        IF temp_after <> temp_before THEN
            RAISE EXCEPTION 'the completer left an object in the session''s temporary schema'
                USING ERRCODE = '42501',
                      DETAIL = format('Temporary objects before: "%s"; after: "%s".', temp_before, temp_after),
                      HINT = 'A completer run by idem.run_maintenance may not leave temporary objects '
                             'for the caller or the next completer.';
        END IF;
        -- Citus 14 on PostgreSQL 18 turns enable_self_join_elimination off
        -- while it plans a distributed statement and leaves it so until the
        -- transaction ends (distributed_planner.c): on a Citus node that one
        -- change is Citus's, not the completer's, and only a planner choice.
        SELECT string_agg(a.key, ', ' ORDER BY a.key) INTO changed
          FROM jsonb_each_text(idem.portable_session_settings()
                               || jsonb_build_object('search_path', current_setting('search_path'))) a
         WHERE a.value IS DISTINCT FROM (settings_before || jsonb_build_object('search_path', path_before))->>a.key
           AND NOT (a.key = 'enable_self_join_elimination'
                    AND to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL);
        IF changed IS NOT NULL THEN
            RAISE EXCEPTION 'the completer left a setting changed: %', changed
                USING ERRCODE = '42501',
                      HINT = 'Give the completer a SET clause for the settings it changes '
                             '(CREATE FUNCTION ... SET name = value) and change them with SET LOCAL.';
        END IF;
    -- OTHERS leaves out query_canceled and assert_failure: named, so that
    -- no SQLSTATE of a completer's stops the call.
    EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
        RAISE WARNING 'idem completer % for scope "%", key "%" failed: %', fname, scope, key, message
            USING ERRCODE = state,
                  DETAIL = 'Its work is undone; the key stays claimed until its lock runs out, then '
                           'a later round tries again.';
        RETURN CASE state WHEN '57014' THEN 'canceled' ELSE 'failed' END;
    END;
    PERFORM idem.portable_judge_as(NULL);
    SELECT r.fence, r.status INTO outcome
      FROM idem.idempotency_request r
     WHERE r.scope = portable_run_completer.scope AND r.key = portable_run_completer.key;
    IF FOUND AND outcome.fence = c.fence AND outcome.status <> 'processing' THEN
        RETURN 'succeeded';
    END IF;
    RAISE LOG 'idem completer % recorded no outcome for scope "%", key "%"', fname, scope, key
        USING DETAIL = 'The key stays processing until its lock runs out; a later round tries again.';
    RETURN 'failed';
END
$$;
REVOKE ALL ON FUNCTION idem.portable_run_completer(text, text, text, oid) FROM PUBLIC;

-- ---- idem.run_completers(): the completers of owners other than the
-- extension's, run by their owner's own call (portable engine only) ----
-- idem.run_maintenance runs as the extension's owner and so runs only that
-- role's completers (portable_completer_refusal says why). A role that
-- owns completers runs them itself: idem.run_completers(), not SECURITY
-- DEFINER, so the completers it calls run as the caller, who owns them,
-- whether they are INVOKER or DEFINER. What it needs as the extension's
-- owner (the due keys, the claim, the outcome) it gets from the two helpers
-- below, each SECURITY DEFINER, granted with it by name (docs/portable.md,
-- "Completers of other roles") and re-checking inside what the call's role
-- may have: the session's role (as every scope check judges), which
-- run_completers first checks is the role it runs as.

-- The session's role: SET ROLE's role, else the login role.
CREATE FUNCTION idem.portable_session_role()
RETURNS oid
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT a.oid FROM pg_catalog.pg_roles a
 WHERE a.rolname = CASE WHEN current_setting('role') = 'none' THEN session_user
                        ELSE current_setting('role') END
$$;
REVOKE ALL ON FUNCTION idem.portable_session_role() FROM PUBLIC;

-- Claims, for the session's role, up to idem.batch_size due keys whose scope's
-- completer that role owns and whose scope it may use (as any covered call
-- judges it), oldest first, and answers each claim with the completer's
-- call. A key of a completer another role owns, or of a scope the role may
-- not use, is never claimed nor shown; a completer that cannot be run as
-- its owner is skipped with a WARNING (portable_completer_refusal). Called
-- directly, it gives its caller nothing it could not take with its own
-- claims: its own scopes' abandoned keys.
CREATE FUNCTION idem.portable_claim_own_completer_keys()
RETURNS TABLE (scope text, key text, fence bigint, recovery_point text, attempt_count integer,
               completer text, call text, batch_limit integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    runner oid := idem.portable_session_role();
    batch integer := idem.portable_batch_size();
    due record;
    policy record;
    c idem.claim;
    reason text;
BEGIN
    PERFORM idem.portable_require_writable('idem.run_completers()');
    IF idem.portable_judged_role() IS NOT NULL THEN
        RAISE EXCEPTION 'idem.run_completers() cannot be called by a completer'
            USING ERRCODE = '55000',
                  HINT = 'Schedule idem.run_completers() as a job of its own.';
    END IF;
    FOR due IN
        SELECT d.scope, d.key, d.request_hash, d.completer
          FROM idem.portable_completer_due(clock_timestamp(), false) d
         WHERE d.owner = runner
         ORDER BY d.since
         LIMIT batch
    LOOP
        CONTINUE WHEN idem.portable_scope_refusal(due.scope) IS NOT NULL;
        reason := idem.portable_completer_refusal(due.completer, runner);
        IF reason IS NOT NULL THEN
            RAISE WARNING 'idem completer % for scope "%", key "%" cannot be run',
                due.completer::regprocedure::text, due.scope, due.key
                USING DETAIL = reason,
                      HINT = 'Fix the completer of the scope in idem.scope_policy, or its owner.';
            CONTINUE;
        END IF;
        policy := idem.portable_claim_policy(due.scope, due.key, NULL, NULL);
        c := idem.portable_claim_once(due.scope, due.key, due.request_hash, 'idem completer',
                                      policy.lock_timeout, policy.retention, policy.max_attempts,
                                      CASE WHEN policy.bind THEN idem.portable_session_token() END);
        CONTINUE WHEN c.fence IS NULL OR c.kind IN ('replay_success', 'final_failure', 'processing_active');
        scope := due.scope;
        key := due.key;
        fence := c.fence;
        recovery_point := c.recovery_point;
        attempt_count := c.attempt_count;
        completer := due.completer::regprocedure::text;
        call := idem.portable_completer_call(due.completer);
        batch_limit := batch;
        RETURN NEXT;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_claim_own_completer_keys() FROM PUBLIC;

-- Whether the completer recorded an outcome for the claim it was given:
-- the key is no longer processing under that fence. Scope-checked as any
-- covered call ({{sqlstate::scope_not_owned}} for a scope the role may not use).
CREATE FUNCTION idem.portable_completer_outcome(scope text, key text, fence bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM idem.portable_check_scope_owner(scope);
    RETURN EXISTS (SELECT FROM idem.idempotency_request r
                    WHERE r.scope = portable_completer_outcome.scope
                      AND r.key = portable_completer_outcome.key
                      AND r.fence = portable_completer_outcome.fence
                      AND r.status <> 'processing');
END
$$;
REVOKE ALL ON FUNCTION idem.portable_completer_outcome(text, text, bigint) FROM PUBLIC;

-- The completers the calling role owns, for the due keys of scopes it may
-- use: one round's worth (idem.batch_size keys), each claimed as the worker
-- claims it and given to its completer in a subtransaction. Not SECURITY
-- DEFINER: the completer runs as the caller, its owner. A completer's
-- error of any SQLSTATE undoes its work alone and is counted; after a
-- query_canceled (the call's statement_timeout, a cancel, or the
-- completer's own) no further completer runs. Answers the counts of
-- run_maintenance's report that concern completers.
CREATE FUNCTION idem.run_completers()
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    batch_limit integer;
    session_role text := CASE WHEN current_setting('role') = 'none' THEN session_user
                              ELSE current_setting('role') END;
    due record;
    claimed integer := 0;
    runs bigint := 0;
    successes bigint := 0;
    failures bigint := 0;
    state text;
    message text;
BEGIN
    -- The completers run as current_user; the helpers judge the session's
    -- role. They must be one role, else a SECURITY DEFINER function of one
    -- role could run another's completers as itself. And that role must be
    -- the login role: in a session that SET ROLE to the owner, an INVOKER
    -- completer could RESET ROLE and run on with the login role's rights,
    -- which may be more than its owner's.
    IF current_user <> session_user OR session_role <> session_user THEN
        RAISE EXCEPTION 'idem.run_completers() runs as role "%" in a session of role "%" logged in as "%"',
                        current_user, session_role, session_user
            USING ERRCODE = '42501',
                  DETAIL = 'It runs the completers the calling role owns, as that role, only in a session '
                           'logged in as that role: not after SET ROLE, and not from a SECURITY DEFINER '
                           'function of another role.',
                  HINT = 'Log in as the completers'' owner (pg_cron runs a job as the role that '
                         'scheduled it), or give the completers to the login role that runs them.';
    END IF;
    FOR due IN SELECT * FROM idem.portable_claim_own_completer_keys() LOOP
        batch_limit := due.batch_limit;
        claimed := claimed + 1;
        runs := runs + 1;
        BEGIN
            EXECUTE due.call USING due.scope, due.key, due.fence, due.recovery_point, due.attempt_count;
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
            RAISE WARNING 'idem completer % for scope "%", key "%" failed: %', due.completer, due.scope,
                          due.key, message
                USING ERRCODE = state,
                      DETAIL = 'Its work is undone; the key stays claimed until its lock runs out, then '
                               'a later round tries again.';
            failures := failures + 1;
            EXIT WHEN state = '57014';
            CONTINUE;
        END;
        IF idem.portable_completer_outcome(due.scope, due.key, due.fence) THEN
            successes := successes + 1;
        ELSE
            failures := failures + 1;
            RAISE LOG 'idem completer % recorded no outcome for scope "%", key "%"', due.completer,
                      due.scope, due.key
                USING DETAIL = 'The key stays processing until its lock runs out; a later round tries again.';
        END IF;
    END LOOP;
    RETURN jsonb_build_object('completer_runs', runs, 'completer_successes', successes,
                              'completer_failures', failures, 'more', coalesce(claimed = batch_limit, false));
END
$$;
REVOKE ALL ON FUNCTION idem.run_completers() FROM PUBLIC;
COMMENT ON FUNCTION idem.run_completers() IS
    'Portable engine: runs, as the calling role, the completers it owns for the due keys of scopes it may use (idem.run_maintenance() runs only the extension owner''s).';
