-- request_invariants_hold(idem.idempotency_request), what the key table's
-- one CHECK calls: the row's columns handed to the rules above
-- (src/keys/row_check.cpp). NULL for a NULL row, as the C++ function
-- (here also for a row whose every column is NULL, which no write can
-- produce: the NOT NULL constraints come first).
LANGUAGE plpgsql
AS $function$
BEGIN
    IF request IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN idem.request_invariants_hold(
        request.scope, request.key, request.request_hash, request.status, request.recovery_point,
        request.fence, request.attempt_count, request.locked_until, request.response_code,
        request.response_body, request.failure_code, request.failure_message,
        request.created_at, request.finished_at, request.expires_at);
END
$function$
