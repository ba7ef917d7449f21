-- peek (src/keys/peek.cpp): what a claim with the stored request hash would
-- answer now (idem.portable_claim_once's classification), from one read:
-- no write, no row lock, no transaction id, no fence. NULL for a key a claim
-- would start afresh (missing, or finished and past expires_at). A
-- takeover at the scope's max_attempts reads as the final_failure the claim
-- would record.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz := pg_catalog.clock_timestamp();
    r idem.idempotency_request;
    kind idem.claim_kind;
    max_attempts integer;
BEGIN
    IF scope IS NULL OR key IS NULL
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
    SELECT * INTO r FROM idem.idempotency_request t
     WHERE t.scope = peek.scope AND t.key = peek.key;
    IF NOT FOUND OR (r.status <> 'processing' AND r.expires_at <= now) THEN
        RETURN NULL;
    END IF;
    IF r.status = 'succeeded' THEN
        kind := 'replay_success';
    ELSIF r.status = 'failed_final' THEN
        kind := 'final_failure';
    ELSIF r.status = 'failed_retryable' THEN
        kind := 'retryable_failure';
    ELSIF r.locked_until <= now
          OR (r.bound_session IS NOT NULL AND NOT idem.portable_session_alive(r.bound_session)) THEN
        kind := 'processing_stale';
    ELSE
        kind := 'processing_active';
    END IF;
    IF kind IN ('retryable_failure', 'processing_stale') THEN
        SELECT sp.max_attempts INTO max_attempts FROM idem.scope_policy sp
         WHERE sp.scope = peek.scope;
        IF max_attempts > 0 AND r.attempt_count >= max_attempts THEN
            kind := 'final_failure';
            r.failure_code := 'too_many_attempts';
            r.failure_message := 'the key reached its scope''s max_attempts';
            r.locked_until := NULL;
        END IF;
    END IF;
    -- form_claim: a twin still at work reports its lock, not the failure it
    -- is retrying.
    RETURN ROW(kind, NULL::bigint, r.attempt_count, r.recovery_point, r.response_code,
               r.response_body, r.result_ref_type, r.result_ref_id,
               CASE WHEN kind <> 'processing_active' THEN r.failure_code END,
               CASE WHEN kind <> 'processing_active' THEN r.failure_message END,
               r.locked_until, r.expires_at)::idem.claim;
END
$function$
