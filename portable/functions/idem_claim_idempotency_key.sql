-- claim_idempotency_key (src/keys/claim.cpp): the arguments are checked in
-- the C++ engine's order (scope, key, request_hash, then the intervals,
-- resolved argument > scope policy > setting), then one claim
-- (idem.portable_claim_once, portable/support-keys.sql): a look without a
-- lock, and a write only when the key must change.
LANGUAGE plpgsql
AS $function$
DECLARE
    policy record;
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR request_hash IS NULL OR request_hash = ''
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_text(request_hash, 'P4003', 'request_hash', scope, key);
    END IF;
    policy := idem.portable_claim_policy(scope, key, lock_timeout, retention);
    RETURN idem.portable_claim_once(scope, key, request_hash, claimed_by,
                                    policy.lock_timeout, policy.retention, policy.max_attempts,
                                    CASE WHEN policy.bind THEN idem.portable_session_token() END);
END
$function$
