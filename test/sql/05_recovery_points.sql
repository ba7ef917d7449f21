-- Recovery points are atomic phases: the checkpoint commits with the
-- phase's own writes, or not at all; a takeover resumes from the last one.
CREATE TABLE phase_effects (key text, phase text);
SELECT fence AS f FROM idem.claim_idempotency_key('phases', 'r1', 'h', 'api-1') \gset

BEGIN;
INSERT INTO phase_effects VALUES ('r1', 'order_created');
SELECT idem.set_recovery_point('phases', 'r1', :f, 'order_created');
COMMIT;

BEGIN;
INSERT INTO phase_effects VALUES ('r1', 'charge_created');
SELECT idem.set_recovery_point('phases', 'r1', :f, 'charge_created');
ROLLBACK;  -- the phase failed: neither its effect nor its checkpoint remain

SELECT recovery_point, locked_until AS lock_before FROM idem.idempotency_request
 WHERE scope = 'phases' AND key = 'r1' \gset
SELECT :'recovery_point' AS recovery_point, array_agg(phase) AS effects FROM phase_effects;

-- set_recovery_point does not extend the lock.
SELECT idem.set_recovery_point('phases', 'r1', :f, 'order_created_again');
SELECT locked_until = :'lock_before' AS lock_unchanged, recovery_point
  FROM idem.idempotency_request WHERE scope = 'phases' AND key = 'r1';

-- The owner crashed; the next claim resumes from the checkpoint.
SELECT age_key('phases', 'r1', lock_over => true, expired => false);
SELECT kind, recovery_point, attempt_count FROM idem.claim_idempotency_key('phases', 'r1', 'h', 'api-2');

-- mark_failed keeps the checkpoint for the retry; mark_succeeded sets 'finished'.
SELECT fence AS f FROM idem.idempotency_request WHERE scope = 'phases' AND key = 'r1' \gset
SELECT idem.set_recovery_point('phases', 'r1', :f, 'charge_created');
SELECT idem.mark_failed('phases', 'r1', :f, true, 'receipt_failed');
SELECT kind, recovery_point FROM idem.claim_idempotency_key('phases', 'r1', 'h');
SELECT fence AS f FROM idem.idempotency_request WHERE scope = 'phases' AND key = 'r1' \gset
SELECT idem.mark_succeeded('phases', 'r1', :f, 201);
SELECT status, recovery_point FROM idem.idempotency_request WHERE scope = 'phases' AND key = 'r1';

-- The claim itself rolls back with its transaction: no key is left behind.
BEGIN;
SELECT kind FROM idem.claim_idempotency_key('phases', 'rolled-back', 'h');
ROLLBACK;
SELECT count(*) FROM idem.idempotency_request WHERE scope = 'phases' AND key = 'rolled-back';
