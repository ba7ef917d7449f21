-- idem.run_maintenance() in PL/pgSQL: the C++ engine's call
-- (src/worker/run_maintenance.cpp) stage for stage, in the worker's order,
-- through the same SQL functions where they exist (sweep_stale,
-- purge_expired, purge_consumed, purge_published) and the worker's own
-- statements otherwise (portable/support-maintenance.sql and
-- support-completers.sql). At most 10 batches of idem.batch_size per
-- stage, so one call is bounded; the same report keys.
-- Completers: only the extension owner's run here, the role this call runs
-- as (idem.portable_completer_refusal says why); another role's are left
-- to that role's idem.run_completers(), with a LOG line, and counted as
-- "completer_keys_left" (a key the report has only when some were left).
-- Each completer runs in a subtransaction, and the completers come last,
-- after the sweep and the purges (the C++ engine runs them third): a
-- completer's error of any SQLSTATE is contained, and the call's
-- statement_timeout (PL/pgSQL cannot arm a limit of its own for one
-- completer: a statement_timeout is armed when a top-level statement
-- starts) or a cancel that ends a completer ends the completers' stage
-- alone, with a WARNING, and the other stages' work is kept and committed,
-- so that a completer that hangs cannot keep the sweep and the purges from
-- ever committing.
LANGUAGE plpgsql
AS $function$
DECLARE
    batches_per_stage constant integer := 10;
    batch_limit integer := idem.portable_batch_size();
    done_rows bigint;
    swept bigint := 0;
    exhausted bigint := 0;
    runs bigint := 0;
    successes bigint := 0;
    failures bigint := 0;
    purged_keys bigint := 0;
    purged_messages bigint := 0;
    purged_events bigint := 0;
    batches integer := 0;
    more boolean := false;
    stage text;
    total bigint;
    due record;
    due_count integer := 0;
    ending text;
    runner oid := (SELECT a.oid FROM pg_catalog.pg_roles a WHERE a.rolname = current_user);
    left_keys bigint := 0;
    left_to record;
    stage_runs bigint;
    stage_successes bigint;
    stage_failures bigint;
BEGIN
    -- Refused as a whole where nothing may be written, naming this call.
    PERFORM idem.portable_require_writable('idem.run_maintenance()');
    FOREACH stage IN ARRAY ARRAY['sweep', 'exhaust', 'purge_keys', 'purge_messages', 'purge_events',
                                  'completers'] LOOP
        IF stage = 'completers' THEN
            stage_runs := runs;
            stage_successes := successes;
            stage_failures := failures;
            BEGIN
                -- Unresolvable names (0) are this call's to claim and fail,
                -- as on the C++ engine.
                FOR due IN SELECT d.scope, d.key, d.request_hash, d.completer
                             FROM idem.portable_completer_due(clock_timestamp(), false) d
                            WHERE d.completer = '0'::oid OR d.owner = runner
                            ORDER BY d.since
                            LIMIT batch_limit LOOP
                    due_count := due_count + 1;
                    ending := idem.portable_run_completer(due.scope, due.key, due.request_hash, due.completer);
                    CONTINUE WHEN ending = 'not_owned';
                    runs := runs + 1;
                    IF ending = 'succeeded' THEN
                        successes := successes + 1;
                    ELSE
                        failures := failures + 1;
                    END IF;
                    EXIT WHEN ending = 'canceled';
                END LOOP;
                more := more OR due_count = batch_limit;
                FOR left_to IN SELECT d.completer, d.owner, count(*) AS keys
                                 FROM idem.portable_completer_due(clock_timestamp(), true) d
                                WHERE d.completer <> '0'::oid AND d.owner <> runner
                                GROUP BY d.completer, d.owner
                                ORDER BY d.completer::regprocedure::text LOOP
                    left_keys := left_keys + left_to.keys;
                    RAISE LOG 'idem.run_maintenance() left % due keys to completer %, owned by role "%"',
                              left_to.keys, left_to.completer::regprocedure::text, pg_get_userbyid(left_to.owner)
                        USING DETAIL = 'The portable engine runs a completer only in a call made as its '
                                       'owner: that role runs it with idem.run_completers().';
                END LOOP;
            EXCEPTION WHEN query_canceled THEN
                -- Canceled outside a completer's own block (its claim, a
                -- lookup): the stage is undone, the other stages are kept.
                runs := stage_runs;
                successes := stage_successes;
                failures := stage_failures;
                RAISE WARNING 'idem.run_maintenance() was canceled during its completers'
                    USING DETAIL = 'The completers'' work in this call is undone; the sweep and the '
                                   'purges are kept.';
            END;
            CONTINUE;
        END IF;
        total := 0;
        FOR batch IN 1 .. batches_per_stage LOOP
            CASE stage
                WHEN 'sweep' THEN done_rows := idem.sweep_stale(batch_limit);
                WHEN 'exhaust' THEN done_rows := idem.portable_exhaust_attempts(clock_timestamp(), batch_limit);
                WHEN 'purge_keys' THEN done_rows := idem.purge_expired(batch_limit);
                WHEN 'purge_messages' THEN done_rows := idem.purge_consumed(batch_limit);
                ELSE done_rows := idem.purge_published(batch_limit);
            END CASE;
            total := total + done_rows;
            IF stage <> 'exhaust' THEN
                batches := batches + 1;
            END IF;
            EXIT WHEN done_rows < batch_limit;
            more := more OR batch = batches_per_stage;
        END LOOP;
        CASE stage
            WHEN 'sweep' THEN swept := total;
            WHEN 'exhaust' THEN exhausted := total;
            WHEN 'purge_keys' THEN purged_keys := total;
            WHEN 'purge_messages' THEN purged_messages := total;
            ELSE purged_events := total;
        END CASE;
    END LOOP;
    RETURN jsonb_build_object(
        'swept', swept, 'exhausted', exhausted,
        'completer_runs', runs, 'completer_successes', successes, 'completer_failures', failures,
        'purged_keys', purged_keys, 'purged_messages', purged_messages, 'purged_events', purged_events,
        'batches', batches, 'more', more)
        || CASE WHEN left_keys > 0 THEN jsonb_build_object('completer_keys_left', left_keys)
                ELSE '{}'::jsonb END;
END
$function$
