-- force_expire (src/keys/key_tools.cpp): the key counts as expired now
-- (never later than it already did, still after created_at); an in-flight
-- key only with force, and it then ends failed_final/'expired' as the
-- sweeper ends an expired one, so the next claim starts a new generation.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz;
    changed idem.idempotency_request;
BEGIN
    PERFORM idem.portable_require_scope_and_key(scope, key);
    PERFORM idem.portable_require_bool(force, 'force', scope, key);
    now := pg_catalog.clock_timestamp();
    UPDATE idem.idempotency_request AS r
       SET status = CASE WHEN r.status = 'processing' THEN 'failed_final'::idem.idempotency_status
                         ELSE r.status END,
           failure_code = CASE WHEN r.status = 'processing' THEN 'expired' ELSE r.failure_code END,
           failure_message = CASE WHEN r.status = 'processing'
                                  THEN 'expired by idem.force_expire before its owner recorded an outcome'
                                  ELSE r.failure_message END,
           locked_until = CASE WHEN r.status = 'processing' THEN NULL ELSE r.locked_until END,
           finished_at = CASE WHEN r.status = 'processing' THEN now ELSE r.finished_at END,
           updated_at = now,
           -- created_at plus one microsecond in UTC: the same instant, by
           -- IMMUTABLE functions (Citus refuses timestamptz + interval, a
           -- STABLE one, on a column in an UPDATE).
           expires_at = LEAST(r.expires_at,
                              GREATEST(now, ((r.created_at AT TIME ZONE 'UTC') + interval '1 microsecond')
                                            AT TIME ZONE 'UTC'))
     WHERE r.scope = force_expire.scope AND r.key = force_expire.key
       AND (r.status <> 'processing' OR force_expire.force)
    RETURNING r.* INTO changed;
    IF NOT FOUND THEN
        PERFORM idem.portable_refuse_tool('force_expire', scope, key);
    END IF;
    PERFORM idem.portable_log_tool_use('force_expire', scope, key,
        pg_catalog.format('expired (status %s, fence %s%s)', changed.status, changed.fence,
                          CASE WHEN force THEN ', forced' ELSE '' END));
    RETURN changed;
END
$function$
