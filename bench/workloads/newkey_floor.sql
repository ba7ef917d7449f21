-- new-key lifecycle (floor): the least SQL a client could send for it, an
-- INSERT ... ON CONFLICT DO NOTHING RETURNING, then an UPDATE by primary key.
\set k random(1, 9000000000000000000)
INSERT INTO floor.idempotency_request (scope, key, request_hash, status, recovery_point,
    fence, attempt_count, claimed_at, locked_until, created_at, updated_at, expires_at)
VALUES ('newkey', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c', 'processing', 'started', nextval('floor.fence_seq'), 1,
    now(), now() + interval '5 minutes', now(), now(), now() + interval '24 hours')
ON CONFLICT (scope, key) DO NOTHING RETURNING fence \gset
UPDATE floor.idempotency_request
SET status = 'succeeded', recovery_point = 'finished', response_code = 201,
    response_body = '{"id": 1}', locked_until = NULL, finished_at = now(), updated_at = now()
WHERE scope = 'newkey' AND key = :k AND fence = :fence AND status = 'processing';
