-- idem.extend_lock: an owner's longer lease. It never shortens a lock,
-- refuses a stale fence (P4012) and a key that is not owned (P4014), checks
-- extend_by (P4004), and brings an abandoned key back to processing.
SELECT fence AS f, locked_until AS first_lock
  FROM idem.claim_idempotency_key('lease', 'k', 'h', NULL, interval '1 minute') \gset
-- Longer: now + extend_by, returned and stored.
SELECT idem.extend_lock('lease', 'k', :f, interval '1 hour') AS longer \gset
SELECT :'longer'::timestamptz > :'first_lock'::timestamptz + interval '50 minutes' AS extended,
       locked_until = :'longer'::timestamptz AS stored, status
  FROM idem.idempotency_request WHERE scope = 'lease' AND key = 'k';
-- Shorter than what it already holds: the lock stays as it is.
SELECT idem.extend_lock('lease', 'k', :f, interval '1 second') = :'longer'::timestamptz AS never_shortened;

-- extend_by: given, finite, positive.
SELECT error_of(format($$SELECT idem.extend_lock('lease', 'k', %s, NULL)$$, :f));
SELECT error_of(format($$SELECT idem.extend_lock('lease', 'k', %s, interval '0')$$, :f));
SELECT error_of(format($$SELECT idem.extend_lock('lease', 'k', %s, interval '-5 minutes')$$, :f));
SELECT error_of($$SELECT idem.extend_lock('lease', 'k', NULL, interval '1 minute')$$);
SELECT error_of($$SELECT idem.extend_lock('', 'k', 1, interval '1 minute')$$);

-- P4014: no such key; a key finished (not owned any more).
SELECT error_of($$SELECT idem.extend_lock('lease', 'missing', 1, interval '1 minute')$$);
SELECT idem.mark_succeeded('lease', 'k', :f, 200);
SELECT regexp_replace(error_of(format($$SELECT idem.extend_lock('lease', 'k', %s, interval '1 minute')$$, :f)),
                      'fence \d+', 'fence N', 'g') AS error_of;

-- P4012: a newer claim took the key over.
SELECT fence AS z FROM idem.claim_idempotency_key('lease', 'zombie', 'h') \gset
SELECT age_key('lease', 'zombie', lock_over => true, expired => false);
SELECT kind FROM idem.claim_idempotency_key('lease', 'zombie', 'h');
SELECT regexp_replace(error_of(format($$SELECT idem.extend_lock('lease', 'zombie', %s, interval '1 minute')$$, :z)),
                      'fence \d+', 'fence N', 'g') AS error_of;

-- Abandoned by the sweeper and not claimed since: processing again for its
-- owner, with its fence and recovery point.
SELECT fence AS a FROM idem.claim_idempotency_key('lease', 'swept', 'h') \gset
SELECT idem.set_recovery_point('lease', 'swept', :a, 'charged');
SELECT age_key('lease', 'swept', lock_over => true, expired => false);
SELECT idem.sweep_stale() >= 1 AS swept;
SELECT status, failure_code FROM idem.idempotency_request WHERE scope = 'lease' AND key = 'swept';
SELECT idem.extend_lock('lease', 'swept', :a, interval '10 minutes') > now() AS relocked;
SELECT status, failure_code, failure_message, finished_at, fence = :a AS same_fence, recovery_point
  FROM idem.idempotency_request WHERE scope = 'lease' AND key = 'swept';
-- A twin now sees it in flight again, and the owner finishes it.
SELECT kind FROM idem.claim_idempotency_key('lease', 'swept', 'h');
SELECT idem.mark_succeeded('lease', 'swept', :a, 201);
SELECT kind, response_code FROM idem.claim_idempotency_key('lease', 'swept', 'h');

SELECT has_function_privilege('public', 'idem.extend_lock(text, text, bigint, interval)', 'EXECUTE') AS public_may_extend;
DELETE FROM idem.idempotency_request WHERE scope = 'lease';
