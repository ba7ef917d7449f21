-- extend_lock (src/keys/outcome.cpp): never shortens a lock; an owner's key
-- the sweeper declared abandoned (and nobody claimed since) is processing
-- again. {{sqlstate::lock_not_owned}} or {{sqlstate::stale_fence}} when the fenced UPDATE matches nothing.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
    result timestamptz;
BEGIN
    PERFORM idem.portable_require_scope_and_key(scope, key);
    PERFORM idem.portable_require_fence(fence, scope, key);
    PERFORM idem.portable_require_positive_interval(extend_by, 'extend_by', now, scope, key,
        'Pass how much longer the lock must hold from now, such as ''5 minutes''; extend_lock never shortens a lock.');
    PERFORM idem.portable_check_scope_owner(scope);
    UPDATE idem.idempotency_request AS r
       SET status = 'processing',
           locked_until = GREATEST(r.locked_until, now + extend_lock.extend_by),
           failure_code = NULL, failure_message = NULL, finished_at = NULL, updated_at = now
     WHERE r.scope = extend_lock.scope AND r.key = extend_lock.key
       AND r.fence = extend_lock.fence
       AND (r.status = 'processing'
            OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned' AND r.expires_at > now))
    RETURNING r.locked_until INTO result;
    IF NOT FOUND THEN
        PERFORM idem.portable_explain_refusal(scope, key, fence, '{{sqlstate::lock_not_owned}}', 'extend_lock');
    END IF;
    RETURN result;
END
$function$
