-- Shape for bench/lifecycle_instructions.sh: 1.0's thirteen rules ANDed into
-- one plain SQL CHECK constraint instead of idem.request_invariants_hold().
-- It shows whether the cost of 1.0's constraints was their number or their
-- size (PostgreSQL reads each stored CHECK expression back from its text and
-- plans it at every INSERT and UPDATE statement). A violation would name
-- only this one constraint, not the rule.
ALTER TABLE idem.idempotency_request
    DROP CONSTRAINT idempotency_request_invariants,
    ADD CONSTRAINT idempotency_request_invariants_sql CHECK (
        char_length(scope) BETWEEN 1 AND 255
        AND char_length(key) BETWEEN 1 AND 255
        AND request_hash <> ''
        AND fence > 0
        AND attempt_count >= 1
        AND recovery_point <> ''
        AND (response_code IS NULL OR response_code BETWEEN 100 AND 599)
        AND expires_at > created_at
        AND (recovery_point = 'finished') = (status = 'succeeded')
        AND (status <> 'processing'
             OR (locked_until IS NOT NULL AND finished_at IS NULL
                 AND response_code IS NULL AND response_body IS NULL))
        AND (status = 'processing' OR (locked_until IS NULL AND finished_at IS NOT NULL))
        AND (status <> 'succeeded'
             OR (response_code IS NOT NULL AND failure_code IS NULL AND failure_message IS NULL))
        AND (status NOT IN ('failed_retryable', 'failed_final')
             OR (failure_code IS NOT NULL AND failure_code <> '')));
