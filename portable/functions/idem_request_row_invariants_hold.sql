-- request_invariants_hold(idem.idempotency_request), what the key table's
-- one CHECK calls at every write (src/keys/row_check.cpp). The thirteen
-- rules as one expression first: a row that keeps them all (every row idem
-- writes) costs this one call. Otherwise the columns go to the rules one
-- by one (idem.request_invariants_hold over the columns), which name the
-- first rule broken, and which alone decide. (The CASE is in parentheses:
-- PL/pgSQL ends an IF's condition at the first THEN outside them.) NULL for a NULL row, as the
-- C++ function (here also for a row whose every column is NULL, which no
-- write can produce: the NOT NULL constraints come first).
LANGUAGE plpgsql
AS $function$
BEGIN
    IF request IS NULL THEN
        RETURN NULL;
    END IF;
    IF pg_catalog.char_length(request.scope) BETWEEN 1 AND 255
       AND pg_catalog.char_length(request.key) BETWEEN 1 AND 255
       AND request.request_hash <> '' AND request.fence > 0 AND request.attempt_count >= 1
       AND request.recovery_point <> ''
       AND coalesce(request.response_code BETWEEN 100 AND 599, true)
       AND request.expires_at > request.created_at
       AND (request.recovery_point = 'finished') = (request.status = 'succeeded')
       AND (CASE WHEN request.status = 'processing'
                THEN request.locked_until IS NOT NULL AND request.finished_at IS NULL
                     AND request.response_code IS NULL AND request.response_body IS NULL
                ELSE request.locked_until IS NULL AND request.finished_at IS NOT NULL
                     AND CASE WHEN request.status = 'succeeded'
                              THEN request.response_code IS NOT NULL AND request.failure_code IS NULL
                                   AND request.failure_message IS NULL
                              ELSE coalesce(request.failure_code <> '', false) END
           END) THEN
        RETURN true;
    END IF;
    RETURN idem.request_invariants_hold(
        request.scope, request.key, request.request_hash, request.status, request.recovery_point,
        request.fence, request.attempt_count, request.locked_until, request.response_code,
        request.response_body, request.failure_code, request.failure_message,
        request.created_at, request.finished_at, request.expires_at);
END
$function$
