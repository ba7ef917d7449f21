-- Applications reach the key store only through its functions.
CREATE ROLE idem_app LOGIN;
CREATE ROLE idem_nobody LOGIN;
GRANT EXECUTE ON FUNCTION
    idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.set_recovery_point(text, text, bigint, text)
  TO idem_app;

SET ROLE idem_app;
SELECT kind, fence > 0 AS owns FROM idem.claim_idempotency_key('priv', 'k', 'h');
SELECT error_of($$SELECT count(*) FROM idem.idempotency_request$$);
SELECT error_of($$UPDATE idem.idempotency_request SET status = 'succeeded'$$);
SELECT error_of($$SELECT nextval('idem.fence_seq')$$);
SELECT error_of($$SELECT idem.purge_expired()$$);
SELECT idem.request_hash('{"a": 1}'::jsonb) IS NOT NULL AS can_hash;
RESET ROLE;

SET ROLE idem_nobody;
SELECT error_of($$SELECT idem.claim_idempotency_key('priv', 'k2', 'h')$$);
SELECT idem.request_hash('\x00'::bytea) IS NOT NULL AS anyone_can_hash;
RESET ROLE;

-- What the app did was recorded normally; claimed_by is what it passed.
SELECT scope, key, status, claimed_by FROM idem.idempotency_request WHERE scope = 'priv';
DROP OWNED BY idem_app, idem_nobody;
DROP ROLE idem_app;
DROP ROLE idem_nobody;
