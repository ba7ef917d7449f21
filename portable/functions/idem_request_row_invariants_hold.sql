-- request_invariants_hold(idem.idempotency_request), what the key table's
-- one CHECK calls at every write (src/keys/row_check.cpp). The thirteen
-- rules as one condition first: a row that keeps them all (every row idem
-- writes) costs this one call. Otherwise the columns go to the rules one
-- by one (idem.request_invariants_hold over the columns), which name the
-- first rule broken, and which alone decide. NULL for a NULL row, as the
-- C++ function (here also for a row whose every column is NULL, which no
-- write can produce: the NOT NULL constraints come first).
--
-- Unpinned (no SET search_path; portable/build.pl's rule for "unpinned"
-- bodies): it runs at every write of the key table, twice a new key's
-- lifecycle, and a pinned search_path costs a settings save and restore
-- per call (about 5% of the lifecycle's instructions). Nothing here is
-- looked up through the caller's search_path: every operator is written
-- OPERATOR(pg_catalog.x), every function and type is schema-qualified, no
-- construct that looks an operator up by name (IN, BETWEEN, IS DISTINCT
-- FROM, NULLIF, CASE x WHEN) and no dynamic SQL; and it is not SECURITY
-- DEFINER, so it runs with its caller's rights (test/sql/79_portable_internal_helpers.sql
-- tries to steer it). Not inlined into the CHECK on purpose: PostgreSQL
-- plans a CHECK expression again at every write statement, and inlining
-- an SQL function there re-reads its body each time (measured: twice the
-- lifecycle's instructions).
-- portable: unpinned
LANGUAGE plpgsql
AS $function$
BEGIN
    IF pg_catalog.char_length(request.scope) OPERATOR(pg_catalog.>=) 1
       AND pg_catalog.char_length(request.scope) OPERATOR(pg_catalog.<=) 255
       AND pg_catalog.char_length(request.key) OPERATOR(pg_catalog.>=) 1
       AND pg_catalog.char_length(request.key) OPERATOR(pg_catalog.<=) 255
       AND request.request_hash OPERATOR(pg_catalog.<>) ''
       AND request.fence OPERATOR(pg_catalog.>) 0
       AND request.attempt_count OPERATOR(pg_catalog.>) 0
       AND request.recovery_point OPERATOR(pg_catalog.<>) ''
       AND (request.response_code IS NULL
            OR request.response_code OPERATOR(pg_catalog.>=) 100
               AND request.response_code OPERATOR(pg_catalog.<=) 599)
       AND request.expires_at OPERATOR(pg_catalog.>) request.created_at
       AND (request.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
            AND request.recovery_point OPERATOR(pg_catalog.<>) 'finished'
            AND request.locked_until IS NOT NULL AND request.finished_at IS NULL
            AND request.response_code IS NULL AND request.response_body IS NULL
            OR request.status OPERATOR(pg_catalog.=) 'succeeded'::idem.idempotency_status
               AND request.recovery_point OPERATOR(pg_catalog.=) 'finished'
               AND request.locked_until IS NULL AND request.finished_at IS NOT NULL
               AND request.response_code IS NOT NULL
               AND request.failure_code IS NULL AND request.failure_message IS NULL
            OR request.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
               AND request.status OPERATOR(pg_catalog.<>) 'succeeded'::idem.idempotency_status
               AND request.recovery_point OPERATOR(pg_catalog.<>) 'finished'
               AND request.locked_until IS NULL AND request.finished_at IS NOT NULL
               AND request.failure_code OPERATOR(pg_catalog.<>) '') THEN
        RETURN true;
    END IF;
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
