-- Every claim kind, and what each reports.

-- new_claim: the caller owns the key.
SELECT kind, fence > 0 AS has_fence, attempt_count, recovery_point,
       locked_until BETWEEN now() + interval '4 min 50 s' AND clock_timestamp() + interval '5 min' AS locked_5_min,
       expires_at BETWEEN now() + interval '23 h 59 min' AND clock_timestamp() + interval '24 h' AS expires_in_24_h,
       response_code, response_body, failure_code
  FROM idem.claim_idempotency_key('orders', 'k1', 'hash-1', 'api-1');
SELECT fence AS k1_fence FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k1' \gset
SELECT status, recovery_point, claimed_by, attempt_count, finished_at IS NULL AS open
  FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k1';

-- processing_active: a twin is told to come back later, with no fence.
SELECT kind, fence, attempt_count, recovery_point, locked_until IS NOT NULL AS has_lock
  FROM idem.claim_idempotency_key('orders', 'k1', 'hash-1', 'api-2');
-- ...and the twin changed nothing.
SELECT claimed_by, fence = :k1_fence AS same_fence, attempt_count
  FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k1';

-- The same key in another scope is another key.
SELECT kind FROM idem.claim_idempotency_key('refunds', 'k1', 'other-hash');

-- replay_success: the stored response, no fence, no lock.
SELECT idem.mark_succeeded('orders', 'k1', :k1_fence, 201, '{"order_id": 7, "total": 12.5}', 'order', '7');
SELECT kind, fence, attempt_count, recovery_point, response_code, response_body,
       result_ref_type, result_ref_id, failure_code, locked_until
  FROM idem.claim_idempotency_key('orders', 'k1', 'hash-1');
SELECT status, recovery_point, locked_until, finished_at IS NOT NULL AS finished
  FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k1';

-- final_failure: replayed with its failure and its response.
SELECT fence AS k2_fence FROM idem.claim_idempotency_key('orders', 'k2', 'hash-2') \gset
SELECT idem.mark_failed('orders', 'k2', :k2_fence, false, 'card_declined', 'Your card was declined.', 402, '{"error": "card_declined"}');
SELECT kind, fence, response_code, response_body, failure_code, failure_message, recovery_point
  FROM idem.claim_idempotency_key('orders', 'k2', 'hash-2');

-- retryable_failure: the next claim takes the key over with a newer fence.
SELECT fence AS k3_fence FROM idem.claim_idempotency_key('orders', 'k3', 'hash-3') \gset
SELECT idem.set_recovery_point('orders', 'k3', :k3_fence, 'order_created');
SELECT idem.mark_failed('orders', 'k3', :k3_fence, true, 'gateway_timeout', 'payment gateway timed out', 503);
SELECT kind, fence > :k3_fence AS newer_fence, attempt_count, recovery_point, failure_code,
       failure_message, response_code, locked_until > now() AS locked
  FROM idem.claim_idempotency_key('orders', 'k3', 'hash-3', 'api-3');
SELECT status, claimed_by, attempt_count, response_code, finished_at
  FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k3';

-- processing_stale: the owner's lock expired; the taker resumes from its checkpoint.
SELECT fence AS k4_fence FROM idem.claim_idempotency_key('orders', 'k4', 'hash-4', 'zombie') \gset
SELECT idem.set_recovery_point('orders', 'k4', :k4_fence, 'charge_created');
SELECT age_key('orders', 'k4', lock_over => true, expired => false);
SELECT kind, fence > :k4_fence AS newer_fence, attempt_count, recovery_point, locked_until > now() AS locked
  FROM idem.claim_idempotency_key('orders', 'k4', 'hash-4', 'rescuer');
SELECT claimed_by, attempt_count FROM idem.idempotency_request WHERE scope = 'orders' AND key = 'k4';

-- Explicit lock_timeout and retention override the settings.
SELECT kind,
       locked_until - clock_timestamp() BETWEEN interval '25 s' AND interval '30 s' AS locked_30_s,
       expires_at - clock_timestamp() BETWEEN interval '6 days 23 h' AND interval '7 days' AS expires_7_days
  FROM idem.claim_idempotency_key('orders', 'k5', 'hash-5', NULL, interval '30 seconds', interval '7 days');

-- The settings: idem.lock_timeout and idem.retention (-1: never expires).
SET idem.lock_timeout = '2min';
SET idem.retention = -1;
SELECT kind,
       locked_until - clock_timestamp() BETWEEN interval '1 min 55 s' AND interval '2 min' AS locked_2_min,
       expires_at
  FROM idem.claim_idempotency_key('orders', 'k6', 'hash-6');
RESET idem.lock_timeout;
RESET idem.retention;
SHOW idem.lock_timeout;
SHOW idem.retention;
SET idem.retention = 0;
SET idem.no_such_setting = 1;

-- Keys are compared exactly: case and whitespace matter, multibyte is fine.
SELECT kind FROM idem.claim_idempotency_key('orders', 'K1', 'hash-1');
SELECT kind FROM idem.claim_idempotency_key('orders', ' k1', 'hash-1');
SELECT kind FROM idem.claim_idempotency_key('orders', 'ключ-☃', 'hash-7');
SELECT kind FROM idem.claim_idempotency_key('orders', 'ключ-☃', 'hash-7');
SELECT kind FROM idem.claim_idempotency_key('orders', repeat('é', 255), 'hash-8');
