-- request_invariants_hold (src/pure/row_invariants.cpp): the thirteen rules
-- in 1.0's order; the first one broken raises {{sqlstate::check_violation}} naming it, with the
-- rule as DETAIL and the same HINT. A rule over a NULL among the NOT NULL
-- columns holds, as a CHECK whose result is NULL passes. Self-contained:
-- the CHECK runs it as the role that writes the row.
LANGUAGE plpgsql
AS $function$
DECLARE
    rule text;
BEGIN
    IF NOT coalesce(pg_catalog.char_length(scope) BETWEEN 1 AND 255, true) THEN
        rule := 'scope_length';
    ELSIF NOT coalesce(pg_catalog.char_length(key) BETWEEN 1 AND 255, true) THEN
        rule := 'key_length';
    ELSIF NOT coalesce(pg_catalog.octet_length(request_hash) > 0, true) THEN
        rule := 'request_hash_present';
    ELSIF NOT coalesce(fence > 0, true) THEN
        rule := 'fence_positive';
    ELSIF NOT coalesce(attempt_count >= 1, true) THEN
        rule := 'attempt_count_positive';
    ELSIF NOT coalesce(pg_catalog.octet_length(recovery_point) > 0, true) THEN
        rule := 'recovery_point_present';
    ELSIF NOT coalesce(response_code BETWEEN 100 AND 599, true) THEN
        rule := 'response_code_is_http_status';
    ELSIF NOT coalesce(expires_at > created_at, true) THEN
        rule := 'expires_after_creation';
    ELSIF NOT coalesce((recovery_point = 'finished') = (status = 'succeeded'), true) THEN
        rule := 'finished_means_succeeded';
    ELSIF status IS NOT DISTINCT FROM 'processing'
          AND NOT (locked_until IS NOT NULL AND finished_at IS NULL
                   AND response_code IS NULL AND response_body IS NULL) THEN
        rule := 'processing_is_locked_and_open';
    ELSIF status IS DISTINCT FROM 'processing' AND status IS NOT NULL
          AND NOT (locked_until IS NULL AND finished_at IS NOT NULL) THEN
        rule := 'outcome_is_unlocked_and_dated';
    ELSIF status IS NOT DISTINCT FROM 'succeeded'
          AND NOT (response_code IS NOT NULL AND failure_code IS NULL AND failure_message IS NULL) THEN
        rule := 'success_has_response';
    ELSIF status IN ('failed_retryable', 'failed_final')
          AND NOT coalesce(failure_code <> '', false) THEN
        rule := 'failure_has_code';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row violates idem invariant "%"', rule
        USING ERRCODE = '{{sqlstate::check_violation}}',
              DETAIL = CASE rule
                  WHEN 'scope_length' THEN 'The scope is 1 to 255 characters long (char_length(scope) BETWEEN 1 AND 255).'
                  WHEN 'key_length' THEN 'The key is 1 to 255 characters long (char_length(key) BETWEEN 1 AND 255).'
                  WHEN 'request_hash_present' THEN 'request_hash is not empty (request_hash <> '''').'
                  WHEN 'fence_positive' THEN 'fence is positive (fence > 0).'
                  WHEN 'attempt_count_positive' THEN 'attempt_count is at least 1 (attempt_count >= 1).'
                  WHEN 'recovery_point_present' THEN 'recovery_point is not empty (recovery_point <> '''').'
                  WHEN 'response_code_is_http_status' THEN 'response_code, when set, is an HTTP status (response_code BETWEEN 100 AND 599).'
                  WHEN 'expires_after_creation' THEN 'expires_at is later than created_at (expires_at > created_at).'
                  WHEN 'finished_means_succeeded' THEN 'recovery_point is ''finished'' exactly when status is ''succeeded'' ((recovery_point = ''finished'') = (status = ''succeeded'')).'
                  WHEN 'processing_is_locked_and_open' THEN 'A processing key holds a lock and has no outcome yet: locked_until is set; finished_at, response_code and response_body are NULL.'
                  WHEN 'outcome_is_unlocked_and_dated' THEN 'A key that is not processing holds no lock and records when it finished: locked_until is NULL and finished_at is set.'
                  WHEN 'success_has_response' THEN 'A succeeded key has a response_code and no failure: response_code is set; failure_code and failure_message are NULL.'
                  ELSE 'A failed key (failed_retryable or failed_final) has a failure_code that is not empty.' END,
              HINT = CASE rule
                  WHEN 'scope_length' THEN 'idem.claim_idempotency_key refuses any other scope ({{sqlstate::scope_invalid}}).'
                  WHEN 'key_length' THEN 'idem.claim_idempotency_key refuses any other key ({{sqlstate::key_invalid}}).'
                  WHEN 'request_hash_present' THEN 'Store the fingerprint the key was claimed with, e.g. idem.request_hash(body).'
                  WHEN 'fence_positive' THEN 'Fences come from idem.fence_seq; only a claim issues one.'
                  WHEN 'attempt_count_positive' THEN 'The claim that creates a key counts attempt 1; each takeover adds one.'
                  WHEN 'recovery_point_present' THEN 'A key starts at ''started''; idem.set_recovery_point moves it on.'
                  WHEN 'response_code_is_http_status' THEN 'Store the status code the API answered with.'
                  WHEN 'expires_after_creation' THEN 'A key that never expires has expires_at = ''infinity''; idem.force_expire makes a key count as expired now.'
                  WHEN 'finished_means_succeeded' THEN 'Only idem.mark_succeeded finishes a key; a failed or in-flight key keeps its last recovery point.'
                  WHEN 'processing_is_locked_and_open' THEN 'Record an outcome with idem.mark_succeeded or idem.mark_failed, which change the status, the lock and the outcome together.'
                  WHEN 'outcome_is_unlocked_and_dated' THEN 'Change the status, locked_until and finished_at together, as idem.mark_succeeded, idem.mark_failed and idem.sweep_stale do.'
                  WHEN 'success_has_response' THEN 'Record a success with idem.mark_succeeded, which stores the response to replay.'
                  ELSE 'Record a failure with idem.mark_failed, which requires a failure_code.' END;
END
$function$
