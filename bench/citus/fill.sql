-- :n finished keys of scope 'replay' (keys 1 .. :n) for the replay cells,
-- the rows bench/setup.sql's bench.fill writes; on the Citus coordinator
-- the INSERT ... SELECT goes through the coordinator into the shards.
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    attempt_count, claimed_at, response_code, response_body, created_at, updated_at,
    finished_at, expires_at)
SELECT 'replay', g::text, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c',
       'succeeded', 'finished', nextval('idem.fence_seq'), 1, now(), 200,
       jsonb_build_object('id', g), now(), now(), now(), 'infinity'
FROM generate_series(1, :n) g;
ANALYZE idem.idempotency_request;
