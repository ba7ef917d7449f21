-- replay (floor): the insert finds the key, so the client reads the stored
-- response.
\set k random(1, 200000)
\set fence 0
INSERT INTO floor.idempotency_request (scope, key, request_hash, status, recovery_point,
    fence, attempt_count, claimed_at, locked_until, created_at, updated_at, expires_at)
VALUES ('replay', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c', 'processing', 'started', nextval('floor.fence_seq'), 1,
    now(), now() + interval '5 minutes', now(), now(), now() + interval '24 hours')
ON CONFLICT (scope, key) DO NOTHING RETURNING fence \aset
\if :fence = 0
SELECT status, request_hash, locked_until, expires_at, response_code, response_body
FROM floor.idempotency_request WHERE scope = 'replay' AND key = :k;
\endif
