-- idem.run_maintenance() in PL/pgSQL: the C++ engine's call
-- (src/worker/run_maintenance.cpp) stage for stage, in the worker's order,
-- through the same SQL functions where they exist (sweep_stale,
-- purge_expired, purge_consumed, purge_published) and the worker's own
-- statements otherwise (portable/support-1.2.sql). At most 10 batches of
-- idem.batch_size per stage, so one call is bounded; the same report keys.
-- Completers: only SECURITY DEFINER ones, or the extension owner's, run
-- (idem.portable_completer_refusal says why); each in a subtransaction.
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
BEGIN
    -- Refused as a whole where nothing may be written, naming this call.
    PERFORM idem.portable_require_writable('idem.run_maintenance()');
    FOREACH stage IN ARRAY ARRAY['sweep', 'exhaust', 'completers', 'purge_keys',
                                  'purge_messages', 'purge_events'] LOOP
        IF stage = 'completers' THEN
            FOR due IN SELECT * FROM idem.portable_completer_candidates(clock_timestamp(), batch_limit) LOOP
                due_count := due_count + 1;
                ending := idem.portable_run_completer(due.scope, due.key, due.request_hash, due.completer);
                CONTINUE WHEN ending = 'not_owned';
                runs := runs + 1;
                IF ending = 'succeeded' THEN
                    successes := successes + 1;
                ELSE
                    failures := failures + 1;
                END IF;
            END LOOP;
            more := more OR due_count = batch_limit;
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
        'batches', batches, 'more', more);
END
$function$
