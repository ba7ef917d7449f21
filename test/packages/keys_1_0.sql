-- Keys in every status, made with idem 1.0's functions only: test/packages.sh
-- then installs the new package over 1.0, runs ALTER EXTENSION idem UPDATE,
-- and checks that each row is intact, each outcome replays as before and
-- each key that can be taken over gets a greater fence.

-- succeeded, after a recovery point
SELECT fence AS f FROM idem.claim_idempotency_key('up', 'ok', 'h-ok') \gset
SELECT idem.set_recovery_point('up', 'ok', :f, 'charged');
SELECT idem.mark_succeeded('up', 'ok', :f, 201, '{"order": 1}', 'order', '1');

-- failed_final
SELECT fence AS f FROM idem.claim_idempotency_key('up', 'final', 'h-final') \gset
SELECT idem.mark_failed('up', 'final', :f, false, 'declined', 'card declined', 402, '{"error": "declined"}');

-- failed_retryable, after a recovery point
SELECT fence AS f FROM idem.claim_idempotency_key('up', 'retry', 'h-retry') \gset
SELECT idem.set_recovery_point('up', 'retry', :f, 'order_created');
SELECT idem.mark_failed('up', 'retry', :f, true, 'provider_down', 'timed out', 503, '{"error": "later"}');

-- processing, owned for a day
SELECT kind FROM idem.claim_idempotency_key('up', 'active', 'h-active', 'worker-1', lock_timeout => '1 day');

-- processing, its lock about to run out (the worker is off: nobody sweeps it)
SELECT kind FROM idem.claim_idempotency_key('up', 'stale', 'h-stale', 'worker-2', lock_timeout => '1 second');

-- succeeded, about to expire (not purged: the worker is off)
SELECT fence AS f FROM idem.claim_idempotency_key('up', 'expired', 'h-expired', retention => '1 second') \gset
SELECT idem.mark_succeeded('up', 'expired', :f, 200);
