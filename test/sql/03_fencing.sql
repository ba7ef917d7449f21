-- Fencing: every ownership grant gets a fence above every fence ever issued
-- for the key, also across expiry, purge and a fresh claim.
SELECT fence AS f1 FROM idem.claim_idempotency_key('fencing', 'k', 'h1') \gset
SELECT age_key('fencing', 'k', lock_over => true, expired => false);
SELECT fence AS f2 FROM idem.claim_idempotency_key('fencing', 'k', 'h1') \gset
SELECT :f2 > :f1 AS stale_takeover_is_newer;
SELECT idem.mark_failed('fencing', 'k', :f2, true, 'boom');
SELECT fence AS f3 FROM idem.claim_idempotency_key('fencing', 'k', 'h1') \gset
SELECT :f3 > :f2 AS retry_takeover_is_newer;
SELECT idem.mark_succeeded('fencing', 'k', :f3, 200);
-- Expired: a new generation (even for a new request hash) with a newer fence.
SELECT age_key('fencing', 'k', lock_over => false, expired => true);
SELECT kind, fence > :f3 AS newer, attempt_count, recovery_point
  FROM idem.claim_idempotency_key('fencing', 'k', 'h2') ;
SELECT fence AS f4 FROM idem.idempotency_request WHERE scope = 'fencing' AND key = 'k' \gset
SELECT idem.mark_succeeded('fencing', 'k', :f4, 200);
-- Purged, then claimed afresh: still newer than anything before.
SELECT age_key('fencing', 'k', lock_over => false, expired => true);
SELECT idem.purge_expired() >= 1 AS purged;
SELECT kind, fence > :f4 AS newer FROM idem.claim_idempotency_key('fencing', 'k', 'h3');
-- Fences of zombies from every earlier generation are refused.
SELECT error_of(format($$SELECT idem.mark_succeeded('fencing', 'k', %s, 200)$$, f)) LIKE 'P4012:%' AS refused
  FROM unnest(ARRAY[:f1, :f2, :f3, :f4]::bigint[]) AS f;

-- The sweeper keeps the fence: an owner swept as abandoned may still finish,
-- as long as nobody claimed the key since.
SELECT fence AS s1 FROM idem.claim_idempotency_key('fencing', 'swept', 'h', NULL, interval '1 hour') \gset
SELECT idem.set_recovery_point('fencing', 'swept', :s1, 'charged');
SELECT age_key('fencing', 'swept', lock_over => true, expired => false);
SELECT idem.sweep_stale() >= 1 AS swept;
SELECT status, failure_code, fence = :s1 AS fence_kept, recovery_point FROM idem.idempotency_request
 WHERE scope = 'fencing' AND key = 'swept';
SELECT idem.mark_succeeded('fencing', 'swept', :s1, 201, '{"late": true}');
SELECT kind, response_body FROM idem.claim_idempotency_key('fencing', 'swept', 'h');
-- ...but not once a new claim has taken the abandoned key.
SELECT fence AS s2 FROM idem.claim_idempotency_key('fencing', 'swept-2', 'h') \gset
SELECT age_key('fencing', 'swept-2', lock_over => true, expired => false);
SELECT idem.sweep_stale() >= 1 AS swept;
SELECT kind, fence > :s2 AS newer, recovery_point, failure_code FROM idem.claim_idempotency_key('fencing', 'swept-2', 'h');
SELECT error_of(format($$SELECT idem.mark_succeeded('fencing', 'swept-2', %s, 200)$$, :s2)) LIKE 'P4012:%' AS zombie_refused;
