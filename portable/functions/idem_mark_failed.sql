-- mark_failed (src/keys/outcome.cpp): the arguments in the C++ engine's
-- order, 'abandoned' refused (the sweeper's marker, which the statements
-- act on), then one fenced UPDATE; {{sqlstate::fail_not_owned}} or {{sqlstate::stale_fence}} when it matches nothing.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR fence IS NULL OR retryable IS NULL OR failure_code IS NULL
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255
       OR fence <= 0 OR failure_code = '' OR failure_code = 'abandoned'
       OR response_code NOT BETWEEN 100 AND 599 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_fence(fence, scope, key);
        PERFORM idem.portable_require_bool(retryable, 'retryable', scope, key);
        PERFORM idem.portable_require_text(failure_code, '{{sqlstate::bad_argument}}', 'failure_code', scope, key);
        IF failure_code = 'abandoned' THEN
            RAISE EXCEPTION 'failure_code ''abandoned'' is reserved for idem''s own markers'
                USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                      HINT = 'idem''s sweeper records ''abandoned'' itself; pass a code of your own, such as ''app_timeout''.';
        END IF;
        PERFORM idem.portable_check_response_code(response_code, false, scope, key);
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
    UPDATE idem.idempotency_request AS r
       SET status = CASE WHEN mark_failed.retryable THEN 'failed_retryable'::idem.idempotency_status
                         ELSE 'failed_final'::idem.idempotency_status END,
           failure_code = mark_failed.failure_code,
           failure_message = mark_failed.failure_message,
           response_code = mark_failed.response_code,
           response_body = mark_failed.response_body,
           locked_until = NULL, finished_at = now, updated_at = now
     WHERE r.scope = mark_failed.scope AND r.key = mark_failed.key
       AND r.fence = mark_failed.fence
       AND (r.status = 'processing'
            OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned' AND r.expires_at > now));
    IF NOT FOUND THEN
        PERFORM idem.portable_explain_refusal(scope, key, fence, '{{sqlstate::fail_not_owned}}', 'mark_failed');
    END IF;
END
$function$
