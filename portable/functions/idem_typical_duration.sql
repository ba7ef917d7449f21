-- typical_duration: the C++ engine keeps a running mean per scope in shared
-- memory, fed by mark_succeeded and mark_failed (each completion moves it by
-- 1/8 of its distance; src/waits/request_durations.cpp). The portable
-- engine computes the same mean from the table: the scope's 64 most
-- recently finished keys (claim to outcome, finished_at - claimed_at),
-- oldest first, leaving out the keys idem itself ended (swept, forced to
-- expire, past max_attempts), which no owner completed. NULL when the
-- scope has none. Reads the scope's rows through the primary key, so its
-- cost grows with the scope's size; idem.retry_after calls it only for a
-- processing_active answer.
LANGUAGE plpgsql
AS $function$
DECLARE
    sample bigint;
    mean bigint;
BEGIN
    FOR sample IN
        SELECT recent.took FROM (
            SELECT r.finished_at,
                   (EXTRACT(EPOCH FROM r.finished_at - r.claimed_at) * 1000000)::bigint AS took
              FROM idem.idempotency_request r
             WHERE r.scope = typical_duration.scope
               AND r.status <> 'processing'
               AND r.finished_at IS NOT NULL
               AND r.failure_message IS DISTINCT FROM 'the owner recorded no outcome before its lock expired'
               AND r.failure_message IS DISTINCT FROM 'expired by idem.force_expire before its owner recorded an outcome'
               AND r.failure_message IS DISTINCT FROM 'the key reached its scope''s max_attempts'
             ORDER BY r.finished_at DESC
             LIMIT 64) recent
         ORDER BY recent.finished_at
    LOOP
        sample := GREATEST(sample, 0);
        mean := CASE WHEN mean IS NULL THEN sample ELSE mean + (sample - mean) / 8 END;
    END LOOP;
    RETURN pg_catalog.make_interval(secs => mean / 1000000.0);
END
$function$
