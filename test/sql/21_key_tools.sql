-- idem.lookup, idem.evict, idem.force_expire: what they do, what they refuse
-- (P4020 no such key, P4021 in flight without force) and what fencing makes
-- of an owner whose key was evicted or expired under it.

SELECT fence AS done_fence FROM idem.claim_idempotency_key('kt', 'done', 'h') \gset
SELECT idem.mark_succeeded('kt', 'done', :done_fence, 201, '{"id": 7}');
SELECT fence AS busy_fence FROM idem.claim_idempotency_key('kt', 'busy', 'h') \gset

-- lookup: the whole row, or no row at all.
SELECT scope, key, status, recovery_point, response_code, response_body, fence = :done_fence AS same_fence
  FROM idem.lookup('kt', 'done');
SELECT count(*) AS rows_for_a_missing_key FROM idem.lookup('kt', 'missing');
SELECT pg_typeof(l) AS row_type FROM idem.lookup('kt', 'busy') l;
SELECT state_of($$SELECT * FROM idem.lookup('kt', '')$$);
SELECT state_of($$SELECT * FROM idem.lookup(NULL, 'k')$$);

-- evict: a finished key goes, and the client may reuse it for a new request.
SELECT key, status FROM idem.evict('kt', 'done');
SELECT count(*) AS left_after_evict FROM idem.lookup('kt', 'done');
SELECT kind, fence > :done_fence AS newer_fence FROM idem.claim_idempotency_key('kt', 'done', 'a new request');
SELECT state_of($$SELECT idem.evict('kt', 'missing')$$);
-- An in-flight key only with force; forced, its owner can no longer finish.
SELECT state_of($$SELECT idem.evict('kt', 'busy')$$);
SELECT state_of($$SELECT idem.evict('kt', 'busy', NULL)$$);
SELECT status FROM idem.lookup('kt', 'busy');
SELECT key, status FROM idem.evict('kt', 'busy', force => true);
SELECT state_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'kt', 'busy', :busy_fence));
SELECT kind, fence > :busy_fence AS newer_fence FROM idem.claim_idempotency_key('kt', 'busy', 'h');

-- force_expire on a finished key: it counts as expired at once (earlier than
-- its retention), so the next claim starts afresh with any request.
SELECT fence AS f FROM idem.claim_idempotency_key('kt', 'exp', 'h', retention => '1 day') \gset
SELECT idem.mark_failed('kt', 'exp', :f, false, 'card_declined', response_code => 402);
SELECT kind FROM idem.claim_idempotency_key('kt', 'exp', 'h');
SELECT status, failure_code, expires_at <= clock_timestamp() AS expired, expires_at > created_at AS after_creation
  FROM idem.force_expire('kt', 'exp');
SELECT expires_at AS first_expiry FROM idem.lookup('kt', 'exp') \gset
-- Again: idempotent, the expiry never moves later.
SELECT expires_at = :'first_expiry' AS expiry_unchanged FROM idem.force_expire('kt', 'exp');
SELECT kind, attempt_count, fence > :f AS newer_fence FROM idem.claim_idempotency_key('kt', 'exp', 'different request');

-- force_expire on an in-flight key: refused without force; forced, it ends
-- the key as the sweeper ends an expired one, the owner's writes are refused
-- and the next claim starts a new generation.
SELECT fence AS g FROM idem.claim_idempotency_key('kt', 'stuck', 'h') \gset
SELECT idem.set_recovery_point('kt', 'stuck', :g, 'charged');
SELECT state_of($$SELECT idem.force_expire('kt', 'stuck')$$);
SELECT status, locked_until IS NOT NULL AS still_locked FROM idem.lookup('kt', 'stuck');
SELECT status, failure_code, failure_message, recovery_point, locked_until IS NULL AS unlocked,
       finished_at IS NOT NULL AS finished, expires_at <= clock_timestamp() AS expired, fence = :g AS fence_kept
  FROM idem.force_expire('kt', 'stuck', true);
SELECT state_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'kt', 'stuck', :g));
SELECT state_of(format('SELECT idem.set_recovery_point(%L, %L, %s, %L)', 'kt', 'stuck', :g, 'shipped'));
SELECT kind, recovery_point, fence > :g AS newer_fence FROM idem.claim_idempotency_key('kt', 'stuck', 'h2');
-- A key the sweeper declared abandoned is finished: no force needed, and its
-- old owner may no longer complete it once it has expired.
SELECT fence AS a FROM idem.claim_idempotency_key('kt', 'abandoned', 'h') \gset
SELECT age_key('kt', 'abandoned', lock_over => true, expired => false);
SELECT idem.sweep_stale() >= 1 AS swept;
SELECT status, failure_code FROM idem.force_expire('kt', 'abandoned');
SELECT state_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'kt', 'abandoned', :a));
SELECT state_of($$SELECT idem.force_expire('kt', 'missing')$$);
SELECT state_of($$SELECT idem.force_expire('kt', 'x', NULL)$$);

-- The purger takes a force-expired key like any expired one.
SELECT fence AS p FROM idem.claim_idempotency_key('kt', 'purge-me', 'h') \gset
SELECT idem.mark_succeeded('kt', 'purge-me', :p, 200);
SELECT status FROM idem.force_expire('kt', 'purge-me');
SELECT idem.purge_expired() >= 1 AS purged;
SELECT count(*) AS purged_key_left FROM idem.lookup('kt', 'purge-me');

-- Refusals carry a detail and a hint.
SELECT error_of($$SELECT idem.evict('kt', 'nothing-here')$$);

