-- purge_expired and sweep_stale: exact counts, batch limits, and what they
-- must never touch. Starts from an empty store.
TRUNCATE idem.idempotency_request;
-- 5 succeeded, 3 failed_final, 2 failed_retryable, all expired; 4 processing
-- rows past expiry (2 with live locks, 2 with expired locks); 3 fresh rows.
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, locked_until, response_code, failure_code, created_at, updated_at, finished_at, expires_at)
SELECT 'm', s.status || '-' || g, 'h', s.status::idem.idempotency_status,
       CASE WHEN s.status = 'succeeded' THEN 'finished' ELSE 'started' END,
       nextval('idem.fence_seq'), now() - interval '3 days',
       CASE WHEN s.status = 'processing' THEN now() + (g % 2) * interval '2 hours' - interval '1 hour' END,
       CASE WHEN s.status = 'succeeded' THEN 200 END,
       CASE WHEN s.status LIKE 'failed%' THEN 'x' END,
       now() - interval '3 days', now() - interval '3 days',
       CASE WHEN s.status <> 'processing' THEN now() - interval '3 days' + g * interval '1 minute' END,
       now() - interval '2 days' + g * interval '1 minute'
  FROM (VALUES ('succeeded', 5), ('failed_final', 3), ('failed_retryable', 2), ('processing', 4)) AS s(status, n),
       generate_series(1, s.n) AS g;
SELECT fence AS fresh FROM idem.claim_idempotency_key('m', 'fresh-1', 'h') \gset
SELECT idem.mark_succeeded('m', 'fresh-1', :fresh, 200);
SELECT kind FROM idem.claim_idempotency_key('m', 'fresh-2', 'h');
SELECT kind FROM idem.claim_idempotency_key('m', 'fresh-3', 'h');
SELECT status, count(*) FROM idem.idempotency_request GROUP BY 1 ORDER BY 1;

-- Purge in batches, oldest first: 4 + 4 + 2, then nothing; processing rows stay.
SELECT idem.purge_expired(4) AS first_batch;
SELECT string_agg(key, ', ' ORDER BY key) AS left_after_first_batch FROM idem.idempotency_request
 WHERE status <> 'processing' AND expires_at <= now();
SELECT idem.purge_expired(4) AS second_batch;
SELECT idem.purge_expired(4) AS third_batch;
SELECT idem.purge_expired() AS nothing_left;
SELECT status, count(*) FROM idem.idempotency_request GROUP BY 1 ORDER BY 1;

-- Sweep: only processing rows whose lock expired; these are also past their
-- expiry, so they end failed_final/'expired'.
SELECT idem.sweep_stale(1) AS first_sweep;
SELECT idem.sweep_stale() AS second_sweep;
SELECT idem.sweep_stale() AS nothing_left;
SELECT key, status, failure_code, locked_until IS NULL AS unlocked, finished_at IS NOT NULL AS finished
  FROM idem.idempotency_request WHERE key LIKE 'processing%' ORDER BY key;
-- A stale key not yet past expiry becomes failed_retryable/'abandoned'.
SELECT age_key('m', 'fresh-2', lock_over => true, expired => false);
SELECT idem.sweep_stale() AS swept;
SELECT key, status, failure_code, failure_message FROM idem.idempotency_request WHERE key = 'fresh-2';
-- The expired ones the sweeper finished are now purgeable.
SELECT idem.purge_expired() AS purged_after_sweep;
SELECT status, count(*) FROM idem.idempotency_request GROUP BY 1 ORDER BY 1;

-- That both skip rows a live transaction holds is shown by test/specs.
