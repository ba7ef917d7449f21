-- Shape for bench/lifecycle_instructions.sh: the key table's one CHECK in the
-- column-argument form Citus can copy to its shards
-- (idem.request_invariants_hold(scope, key, ...), what
-- idem.citus_distribute() puts in place) instead of the whole-row form a
-- single server keeps. Same rules and messages; it shows what the form
-- costs per new key.
ALTER TABLE idem.idempotency_request
    DROP CONSTRAINT idempotency_request_invariants,
    ADD CONSTRAINT idempotency_request_invariants CHECK (idem.request_invariants_hold(
        scope, key, request_hash, status, recovery_point, fence, attempt_count,
        locked_until, response_code, response_body, failure_code, failure_message,
        created_at, finished_at, expires_at));
