-- sweep_stale (src/keys/maintenance.cpp): one bounded batch of in-flight
-- keys whose lock ran out, or whose bound session ended
-- (idem.bind_lock_to_session), marked failed_retryable/'abandoned' (or
-- failed_final/'expired' past expires_at); fence and recovery point stay.
-- As in the C++ engine, the candidates are locked first and the live
-- sessions read with every candidate locked, so a row is judged as it is
-- under its lock; only the rows still stale then are marked. Sessions are
-- read from pg_stat_activity (portable/support-keys.sql): when some are
-- hidden from the extension's owner, only run-out locks are swept. The
-- batch is taken from each relation idem.portable_local_relations gives
-- (the table, or this Citus node's shards of it) in turn, at most
-- batch_limit keys in all.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz;
    live record;
    relation regclass;
    stale tid[];
    swept bigint := 0;
    marked bigint;
BEGIN
    PERFORM idem.portable_require_batch_limit(batch_limit);
    PERFORM idem.portable_require_writable('idem.sweep_stale()');
    now := pg_catalog.clock_timestamp();
    live := idem.portable_live_sessions();
    FOR relation IN SELECT * FROM idem.portable_local_relations('idem.idempotency_request'::pg_catalog.regclass) LOOP
        EXIT WHEN swept >= batch_limit;
        EXECUTE pg_catalog.format(
            'SELECT pg_catalog.array_agg(c.tid) FROM (
               SELECT s.ctid AS tid FROM %s s
                WHERE s.status = ''processing''
                  AND (s.locked_until <= $1
                       OR $2 AND s.bound_session IS NOT NULL AND s.bound_session <> ALL ($3))
                ORDER BY s.locked_until
                LIMIT $4
                  FOR UPDATE SKIP LOCKED) c', relation)
           INTO stale
          USING now, live.complete, live.tokens, batch_limit - swept;
        CONTINUE WHEN stale IS NULL;
        live := idem.portable_live_sessions();
        EXECUTE pg_catalog.format(
            'UPDATE %s AS r
                SET status = CASE WHEN r.expires_at <= $1 THEN ''failed_final''::idem.idempotency_status
                                  ELSE ''failed_retryable''::idem.idempotency_status END,
                    failure_code = CASE WHEN r.expires_at <= $1 THEN ''expired'' ELSE ''abandoned'' END,
                    failure_message = ''the owner recorded no outcome before its lock expired'',
                    locked_until = NULL, finished_at = $1, updated_at = $1
              WHERE r.ctid = ANY ($4)
                AND r.status = ''processing''
                AND (r.locked_until <= $1
                     OR $2 AND r.bound_session IS NOT NULL AND r.bound_session <> ALL ($3))', relation)
          USING now, live.complete, live.tokens, stale;
        GET DIAGNOSTICS marked = ROW_COUNT;
        swept := swept + marked;
    END LOOP;
    RETURN swept;
END
$function$
