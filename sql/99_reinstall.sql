-- DROP and CREATE EXTENSION in the same session: the kept plans are
-- replanned against the new objects and the cached enum OIDs follow.
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
DROP EXTENSION idem;
CREATE EXTENSION idem;
SELECT kind, fence FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
SELECT kind FROM idem.claim_idempotency_key('reinstall', 'k', 'h');
SELECT count(*) FROM idem.idempotency_request;
