-- hot keys (floor): insert; if the key is there, try to take a retryable
-- failure over by primary key; the winner records a retryable failure, a
-- loser reads the row (its lock tells it when to come back).
\set k random(1, 16)
\set fence 0
INSERT INTO floor.idempotency_request (scope, key, request_hash, status, recovery_point,
    fence, attempt_count, claimed_at, locked_until, created_at, updated_at, expires_at)
VALUES ('hot', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c', 'processing', 'started', nextval('floor.fence_seq'), 1,
    now(), now() + interval '5 minutes', now(), now(), now() + interval '24 hours')
ON CONFLICT (scope, key) DO NOTHING RETURNING fence \aset
\if :fence = 0
UPDATE floor.idempotency_request
SET status = 'processing', fence = nextval('floor.fence_seq'), attempt_count = attempt_count + 1,
    claimed_at = now(), locked_until = now() + interval '5 minutes', updated_at = now(),
    finished_at = NULL, response_code = NULL, response_body = NULL
WHERE scope = 'hot' AND key = :k AND status = 'failed_retryable' RETURNING fence \aset
\endif
\if :fence > 0
UPDATE floor.idempotency_request
SET status = 'failed_retryable', failure_code = 'try_again', locked_until = NULL,
    finished_at = now(), updated_at = now()
WHERE scope = 'hot' AND key = :k AND fence = :fence AND status = 'processing';
\else
SELECT status, locked_until FROM floor.idempotency_request WHERE scope = 'hot' AND key = :k;
\endif
