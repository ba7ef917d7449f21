-- sweep_stale (src/keys/maintenance.cpp): one bounded batch of in-flight
-- keys whose lock ran out, or whose bound session ended
-- (idem.bind_lock_to_session), marked failed_retryable/'abandoned' (or
-- failed_final/'expired' past expires_at); fence and recovery point stay.
-- As in the C++ engine, the candidates are locked first and the live
-- sessions read with every candidate locked, so a row is judged as it is
-- under its lock; only the rows still stale then are marked. Sessions are
-- read from pg_stat_activity (portable/support-keys.sql): when some are
-- hidden from the extension's owner, only run-out locks are swept.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz;
    live record;
    candidate record;
    stale tid[] := '{}';
    swept bigint;
BEGIN
    PERFORM idem.portable_require_batch_limit(batch_limit);
    PERFORM idem.portable_require_writable('idem.sweep_stale()');
    now := pg_catalog.clock_timestamp();
    live := idem.portable_live_sessions();
    FOR candidate IN
        SELECT s.ctid AS tid, s.bound_session, s.locked_until <= now AS lock_ended
          FROM idem.idempotency_request s
         WHERE s.status = 'processing'
           AND (s.locked_until <= now
                OR live.complete AND s.bound_session IS NOT NULL
                   AND s.bound_session <> ALL (live.tokens))
         ORDER BY s.locked_until
         LIMIT batch_limit
           FOR UPDATE SKIP LOCKED
    LOOP
        stale := stale || candidate.tid;
    END LOOP;
    IF pg_catalog.cardinality(stale) = 0 THEN
        RETURN 0;
    END IF;
    live := idem.portable_live_sessions();
    UPDATE idem.idempotency_request AS r
       SET status = CASE WHEN r.expires_at <= now THEN 'failed_final'::idem.idempotency_status
                         ELSE 'failed_retryable'::idem.idempotency_status END,
           failure_code = CASE WHEN r.expires_at <= now THEN 'expired' ELSE 'abandoned' END,
           failure_message = 'the owner recorded no outcome before its lock expired',
           locked_until = NULL, finished_at = now, updated_at = now
     WHERE r.ctid = ANY (stale)
       AND r.status = 'processing'
       AND (r.locked_until <= now
            OR live.complete AND r.bound_session IS NOT NULL
               AND r.bound_session <> ALL (live.tokens));
    GET DIAGNOSTICS swept = ROW_COUNT;
    RETURN swept;
END
$function$
