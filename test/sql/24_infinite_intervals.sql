-- Intervals that never end. From PostgreSQL 17 'infinity'::interval exists;
-- as a lock_timeout it would make a key that never goes stale, as a
-- retention one that never expires, so idem refuses both with P4004
-- (idem.retention = -1 is the way to keep keys forever). On 15 the literal
-- itself is refused by PostgreSQL (22007): 24_infinite_intervals_1.out.
SELECT error_of($$SELECT idem.claim_idempotency_key('inf', 'k1', 'h', NULL, 'infinity')$$) AS lock_timeout_infinity;
SELECT error_of($$SELECT idem.claim_idempotency_key('inf', 'k2', 'h', NULL, '-infinity')$$) AS lock_timeout_minus_infinity;
SELECT error_of($$SELECT idem.claim_idempotency_key('inf', 'k3', 'h', NULL, NULL, 'infinity')$$) AS retention_infinity;
SELECT error_of($$SELECT idem.claim_idempotency_key('inf', 'k4', 'h', NULL, NULL, '-infinity')$$) AS retention_minus_infinity;
-- Named arguments, as an application would write them.
SELECT error_of($$SELECT idem.claim_idempotency_key('inf', 'k5', 'h', lock_timeout => 'infinity'::interval)$$) AS named_lock_timeout;

-- Nothing was written, and a finite interval still works on the same key.
SELECT count(*) AS rows_written FROM idem.idempotency_request WHERE scope = 'inf';
SELECT kind, locked_until > now() AS locked, expires_at > now() + interval '1 day' AS expires_later
  FROM idem.claim_idempotency_key('inf', 'k1', 'h', NULL, '1 minute', '2 days');
