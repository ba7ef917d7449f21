-- 'abandoned', the sweeper's marker, cannot be written by an owner: it would
-- make the key look swept (extend_lock would revive it and mark_succeeded
-- overwrite the recorded failure). idem's other codes ('expired',
-- 'too_many_attempts') are only reported, never acted on, and stay an
-- application's to use, as in 1.0.
TRUNCATE idem.idempotency_request;
SET idem.lock_timeout = '5min';
SELECT fence AS f FROM idem.claim_idempotency_key('rc', 'k', 'h') \gset
SELECT error_of(format($$SELECT idem.mark_failed('rc', 'k', %s, true, 'abandoned', 'forged')$$, :f));
SELECT kind FROM idem.mark_failed_returning('rc', 'k', :f, true, 'abandoned');
-- Near misses are the owner's own codes.
SELECT idem.mark_failed('rc', 'k', :f, true, 'Abandoned ');
SELECT key, status, failure_code FROM idem.idempotency_request WHERE scope = 'rc';
SELECT fence AS e FROM idem.claim_idempotency_key('rc', 'card', 'h') \gset
SELECT idem.mark_failed('rc', 'card', :e, false, 'expired', 'the card expired');
SELECT key, status, failure_code FROM idem.idempotency_request WHERE key = 'card';

-- An owner's recorded failure stands: extend_lock and mark_succeeded refuse.
SELECT fence AS g FROM idem.claim_idempotency_key('rc', 'k2', 'h') \gset
SELECT idem.mark_failed('rc', 'k2', :g, true, 'app_timeout');
SELECT state_of(format($$SELECT idem.extend_lock('rc', 'k2', %s, '1 hour')$$, :g));
SELECT state_of(format($$SELECT idem.mark_succeeded('rc', 'k2', %s, 200)$$, :g));
SELECT key, status, failure_code FROM idem.idempotency_request WHERE key = 'k2';

-- The sweeper still writes 'abandoned' (docs/contract.md "Expiry and maintenance"), and its owner may still
-- finish the key.
SELECT fence AS s FROM idem.claim_idempotency_key('rc', 'swept', 'h') \gset
UPDATE idem.idempotency_request SET claimed_at = now() - interval '2 hours',
       created_at = now() - interval '2 hours', updated_at = now() - interval '2 hours',
       locked_until = now() - interval '1 hour'
 WHERE key = 'swept';
SELECT idem.sweep_stale() AS swept;
SELECT key, status, failure_code FROM idem.idempotency_request WHERE key = 'swept';
SELECT idem.extend_lock('rc', 'swept', :s, '1 hour') > now() AS revived;
SELECT idem.mark_succeeded('rc', 'swept', :s, 200);
SELECT key, status, failure_code FROM idem.idempotency_request WHERE key = 'swept';

-- Bound keys (idem.bind_lock_to_session): the sweep locks its candidates,
-- then reads the live sessions, and sweeps a key only if its session ended.
-- This session's own bound key stays; a key bound to a token no session
-- holds is swept although its lock runs for an hour more.
SET idem.bind_lock_to_session = on;
SELECT kind FROM idem.claim_idempotency_key('rc', 'mine', 'h');
SELECT kind FROM idem.claim_idempotency_key('rc', 'gone', 'h');
RESET idem.bind_lock_to_session;
UPDATE idem.idempotency_request SET bound_session = 1 WHERE key = 'gone';
SELECT idem.sweep_stale() AS swept;
SELECT key, status, failure_code, bound_session IS NOT NULL AS bound
  FROM idem.idempotency_request WHERE key IN ('mine', 'gone') ORDER BY key;
TRUNCATE idem.idempotency_request;
RESET idem.lock_timeout;
