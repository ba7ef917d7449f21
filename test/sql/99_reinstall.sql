-- DROP and CREATE EXTENSION in the same session: the kept plans are
-- replanned against the new objects and the cached enum OIDs follow.
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
DROP EXTENSION idem;
CREATE EXTENSION idem;
SELECT kind, fence FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
SELECT count(*) FROM idem.idempotency_request;
-- One session from 1.0 to 1.1: what claims keep per backend (whether the
-- key table has bound_session, the status labels' OIDs, idem.claim's
-- descriptor) is forgotten when those objects change, so the first claim
-- after ALTER EXTENSION UPDATE binds its lock (a kept "1.0 table" answer
-- would refuse it, 55000) and replays still read the right labels.
DROP EXTENSION idem;
CREATE EXTENSION idem VERSION '1.0';
WITH c AS (SELECT * FROM idem.claim_idempotency_key('reinstall', 'old', 'h'))
SELECT c.kind, idem.mark_succeeded('reinstall', 'old', c.fence, 201, '{"v": 1}') FROM c;
SELECT kind, response_code, response_body FROM idem.claim_idempotency_key('reinstall', 'old', 'h');
SET idem.bind_lock_to_session = on;
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'refused at 1.0', 'h');
ALTER EXTENSION idem UPDATE;
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'bound', 'h');
SELECT key, bound_session IS NOT NULL AS bound FROM idem.idempotency_request
WHERE scope = 'reinstall' ORDER BY key;
RESET idem.bind_lock_to_session;
SELECT kind, response_code, response_body FROM idem.claim_idempotency_key('reinstall', 'old', 'h');
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'bound', 'h');
