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
    PERFORM idem.portable_require_scope_and_key(scope, key);
    PERFORM idem.portable_require_text(request_hash, 'P4003', 'request_hash', scope, key);
    policy := idem.portable_claim_policy(scope, key, lock_timeout, retention);
    RETURN idem.portable_claim_once(scope, key, request_hash, claimed_by,
                                    policy.lock_timeout, policy.retention, policy.max_attempts,
                                    CASE WHEN policy.bind THEN idem.portable_session_token() END);
END
$function$
