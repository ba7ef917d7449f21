-- A long purge can be cancelled: statement_timeout ends a batch of 200,000
-- expired keys with 57014, nothing is deleted, and the next purge runs.
-- (test/t/083_call_cancel.pl shows the cancel reaches the purge's delete
-- loop itself, not only the statements around it.)
TRUNCATE idem.idempotency_request;
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
SELECT 'pc', g::text, 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day', 200
FROM generate_series(1, 200000) g;

-- Terse: where the timeout strikes (the candidates' SELECT or the delete
-- loop) shows only in the context.
\set VERBOSITY terse
SET statement_timeout = '10ms';
SELECT idem.purge_expired(1000000);
RESET statement_timeout;
\set VERBOSITY default
SELECT count(*) AS still_there FROM idem.idempotency_request;

-- The session goes on; the purge, not cut short, deletes them all.
SELECT kind FROM idem.claim_idempotency_key('pc', 'next', 'h');
SELECT idem.purge_expired(1000000) AS purged;
SELECT key, status FROM idem.idempotency_request;
TRUNCATE idem.idempotency_request;
