-- set_recovery_point (src/keys/outcome.cpp): 'finished' is mark_succeeded's
-- alone; one fenced UPDATE, {{sqlstate::checkpoint_not_owned}} or {{sqlstate::stale_fence}} when it matches nothing.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    PERFORM idem.portable_require_scope_and_key(scope, key);
    PERFORM idem.portable_require_fence(fence, scope, key);
    PERFORM idem.portable_require_text(recovery_point, '{{sqlstate::bad_argument}}', 'recovery_point', scope, key);
    IF recovery_point = 'finished' THEN
        RAISE EXCEPTION 'recovery point ''finished'' can only be reached through mark_succeeded'
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Call idem.mark_succeeded to finish the request.';
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
    UPDATE idem.idempotency_request AS r
       SET recovery_point = set_recovery_point.recovery_point, updated_at = now
     WHERE r.scope = set_recovery_point.scope AND r.key = set_recovery_point.key
       AND r.fence = set_recovery_point.fence
       AND (r.status = 'processing'
            OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned' AND r.expires_at > now));
    IF NOT FOUND THEN
        PERFORM idem.portable_explain_refusal(scope, key, fence, '{{sqlstate::checkpoint_not_owned}}', 'set_recovery_point');
    END IF;
END
$function$
