-- Applications reach the key store only through its functions.
CREATE ROLE idem_app LOGIN;
CREATE ROLE idem_nobody LOGIN;
GRANT EXECUTE ON FUNCTION
    idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.set_recovery_point(text, text, bigint, text),
    idem.release(text, text, bigint),
    idem.peek(text, text)
  TO idem_app;

SET ROLE idem_app;
SELECT kind, fence > 0 AS owns FROM idem.claim_idempotency_key('priv', 'k', 'h');
SELECT error_of($$SELECT count(*) FROM idem.idempotency_request$$);
SELECT error_of($$UPDATE idem.idempotency_request SET status = 'succeeded'$$);
SELECT error_of($$SELECT nextval('idem.fence_seq')$$);
SELECT error_of($$SELECT idem.purge_expired()$$);
SELECT idem.request_hash('{"a": 1}'::jsonb) IS NOT NULL AS can_hash;
-- 1.2: an adapter reads its key by name and gives it up with its fence.
SELECT kind, fence IS NULL AS no_fence FROM idem.peek('priv', 'k');
SELECT fence AS app_fence FROM idem.claim_idempotency_key('priv', 'released', 'h') \gset
SELECT idem.release('priv', 'released', :app_fence);
SELECT idem.peek('priv', 'released') IS NULL AS released_reads_absent;
RESET ROLE;

SET ROLE idem_nobody;
SELECT error_of($$SELECT idem.claim_idempotency_key('priv', 'k2', 'h')$$);
SELECT error_of($$SELECT idem.peek('priv', 'k')$$);
SELECT error_of($$SELECT idem.release('priv', 'k', 1)$$);
SELECT idem.request_hash('\x00'::bytea) IS NOT NULL AS anyone_can_hash;
RESET ROLE;

-- What the app did was recorded normally; claimed_by is what it passed.
SELECT scope, key, status, claimed_by FROM idem.idempotency_request WHERE scope = 'priv';
DROP OWNED BY idem_app, idem_nobody;
DROP ROLE idem_app;
DROP ROLE idem_nobody;
