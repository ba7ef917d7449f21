-- The key table's rules written as a plain-SQL client must write them:
-- thirteen named CHECK constraints, exactly idem 1.0's (sql/idem--1.0.sql).
-- The floor and the PL/pgSQL reference carry these, so every peer enforces
-- the same invariants and names the broken rule; idem 1.1 enforces them with
-- one CHECK calling its C function (sql/idem--1.0--1.1.sql), which a
-- plain-SQL client does not have. What that costs each peer per write is in
-- bench/README.md. Loaded with psql: :invariants_table names the table.
ALTER TABLE :invariants_table
    ADD CONSTRAINT scope_length CHECK (char_length(scope) BETWEEN 1 AND 255),
    ADD CONSTRAINT key_length CHECK (char_length(key) BETWEEN 1 AND 255),
    ADD CONSTRAINT request_hash_present CHECK (request_hash <> ''),
    ADD CONSTRAINT fence_positive CHECK (fence > 0),
    ADD CONSTRAINT attempt_count_positive CHECK (attempt_count >= 1),
    ADD CONSTRAINT recovery_point_present CHECK (recovery_point <> ''),
    ADD CONSTRAINT response_code_is_http_status CHECK (response_code BETWEEN 100 AND 599),
    ADD CONSTRAINT expires_after_creation CHECK (expires_at > created_at),
    ADD CONSTRAINT finished_means_succeeded
        CHECK ((recovery_point = 'finished') = (status = 'succeeded')),
    ADD CONSTRAINT processing_is_locked_and_open CHECK (
        status <> 'processing'
        OR (locked_until IS NOT NULL AND finished_at IS NULL
            AND response_code IS NULL AND response_body IS NULL)),
    ADD CONSTRAINT outcome_is_unlocked_and_dated CHECK (
        status = 'processing' OR (locked_until IS NULL AND finished_at IS NOT NULL)),
    ADD CONSTRAINT success_has_response CHECK (
        status <> 'succeeded'
        OR (response_code IS NOT NULL AND failure_code IS NULL AND failure_message IS NULL)),
    ADD CONSTRAINT failure_has_code CHECK (
        status NOT IN ('failed_retryable', 'failed_final')
        OR (failure_code IS NOT NULL AND failure_code <> ''));
