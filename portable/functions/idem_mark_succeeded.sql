-- mark_succeeded (src/keys/outcome.cpp): one fenced UPDATE; only when it
-- matches no row is the key read again to say why ({{sqlstate::succeed_not_owned}} or {{sqlstate::stale_fence}}). The
-- duration estimate the C++ engine feeds here is read from the table by
-- idem.typical_duration instead, and there are no waiters to wake (a
-- portable claim_or_wait polls).
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR fence IS NULL OR response_code IS NULL
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255
       OR fence <= 0 OR response_code NOT BETWEEN 100 AND 599 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_fence(fence, scope, key);
        PERFORM idem.portable_check_response_code(response_code, true, scope, key);
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
    UPDATE idem.idempotency_request AS r
       SET status = 'succeeded', recovery_point = 'finished',
           response_code = mark_succeeded.response_code,
           response_body = mark_succeeded.response_body,
           result_ref_type = mark_succeeded.result_ref_type,
           result_ref_id = mark_succeeded.result_ref_id,
           failure_code = NULL, failure_message = NULL, locked_until = NULL,
           finished_at = now, updated_at = now
     WHERE r.scope = mark_succeeded.scope AND r.key = mark_succeeded.key
       AND r.fence = mark_succeeded.fence
       AND (r.status = 'processing'
            OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned' AND r.expires_at > now));
    IF NOT FOUND THEN
        PERFORM idem.portable_explain_refusal(scope, key, fence, '{{sqlstate::succeed_not_owned}}', 'mark_succeeded');
    END IF;
END
$function$
