-- release (src/keys/release.cpp): the owner gives its key up. The arguments
-- in the C++ engine's order, then one fenced DELETE under the rule of the
-- owner's writes (processing, or abandoned by the sweeper and not claimed
-- since); {{sqlstate::release_not_owned}} or {{sqlstate::stale_fence}} when it matches nothing. The next claim inserts a
-- new row, its fence from idem.fence_seq: above every fence before. Waiters
-- in claim_or_wait poll here, so there is no one to wake.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR fence IS NULL
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255
       OR fence <= 0 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_fence(fence, scope, key);
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
    DELETE FROM idem.idempotency_request AS r
     WHERE r.scope = release.scope AND r.key = release.key
       AND r.fence = release.fence
       AND (r.status = 'processing'
            OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned' AND r.expires_at > now));
    IF NOT FOUND THEN
        PERFORM idem.portable_explain_refusal(scope, key, fence, '{{sqlstate::release_not_owned}}', 'release');
    END IF;
END
$function$
