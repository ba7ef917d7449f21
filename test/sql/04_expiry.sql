-- "A finished row whose expires_at has passed behaves exactly as if the
-- purger had already deleted it"; in-flight rows never expire that way.
SELECT fence AS f FROM idem.claim_idempotency_key('expiry', 'done', 'old-request') \gset
SELECT idem.mark_succeeded('expiry', 'done', :f, 200, '{"v": 1}');
SELECT age_key('expiry', 'done', lock_over => false, expired => true);
-- A new request hash is accepted: the old generation is gone.
SELECT kind, attempt_count, recovery_point, response_code, response_body, failure_code,
       expires_at > now() AS fresh_expiry
  FROM idem.claim_idempotency_key('expiry', 'done', 'new-request');
SELECT request_hash, status, attempt_count, result_ref_type, finished_at,
       created_at > now() - interval '1 minute' AS recreated
  FROM idem.idempotency_request WHERE scope = 'expiry' AND key = 'done';

-- The same for final and retryable failures.
SELECT fence AS f FROM idem.claim_idempotency_key('expiry', 'final', 'h') \gset
SELECT idem.mark_failed('expiry', 'final', :f, false, 'declined');
SELECT age_key('expiry', 'final', lock_over => false, expired => true);
SELECT kind, failure_code FROM idem.claim_idempotency_key('expiry', 'final', 'h');
SELECT fence AS f FROM idem.claim_idempotency_key('expiry', 'retry', 'h') \gset
SELECT idem.mark_failed('expiry', 'retry', :f, true, 'timeout');
SELECT age_key('expiry', 'retry', lock_over => false, expired => true);
SELECT kind, attempt_count, failure_code FROM idem.claim_idempotency_key('expiry', 'retry', 'other-h');

-- A processing row past expires_at is still owned while its lock lasts...
SELECT fence AS f FROM idem.claim_idempotency_key('expiry', 'inflight', 'h') \gset
SELECT age_key('expiry', 'inflight', lock_over => false, expired => true);
SELECT kind FROM idem.claim_idempotency_key('expiry', 'inflight', 'h');
SELECT error_of($$SELECT idem.claim_idempotency_key('expiry', 'inflight', 'other-h')$$) LIKE 'P4002:%' AS still_checked;
-- ...and its owner may still finish it.
SELECT idem.mark_succeeded('expiry', 'inflight', :f, 200);

-- A takeover may only extend expires_at, never shorten it.
SELECT fence AS f, expires_at AS long_expiry
  FROM idem.claim_idempotency_key('expiry', 'extend', 'h', NULL, NULL, interval '30 days') \gset
SELECT age_key('expiry', 'extend', lock_over => true, expired => false);
SELECT kind, expires_at = :'long_expiry' AS kept_longer
  FROM idem.claim_idempotency_key('expiry', 'extend', 'h', NULL, NULL, interval '1 hour');
SELECT age_key('expiry', 'extend', lock_over => true, expired => false);
SELECT kind, expires_at > :'long_expiry' AS extended
  FROM idem.claim_idempotency_key('expiry', 'extend', 'h', NULL, NULL, interval '60 days');
-- Completion does not move it.
SELECT fence AS f, expires_at AS e FROM idem.idempotency_request WHERE scope = 'expiry' AND key = 'extend' \gset
SELECT idem.mark_succeeded('expiry', 'extend', :f, 200);
SELECT expires_at = :'e' AS unchanged FROM idem.idempotency_request WHERE scope = 'expiry' AND key = 'extend';

-- idem.retention = -1: never expires, never purged.
SET idem.retention = -1;
SELECT fence AS f FROM idem.claim_idempotency_key('expiry', 'forever', 'h') \gset
RESET idem.retention;
SELECT idem.mark_succeeded('expiry', 'forever', :f, 200);
SELECT expires_at FROM idem.idempotency_request WHERE scope = 'expiry' AND key = 'forever';
SELECT count(*) AS purgeable FROM idem.idempotency_request
 WHERE scope = 'expiry' AND key = 'forever' AND expires_at <= now();
