-- idem.bind_lock_to_session: off by default, settable by any user; when on,
-- a claim that grants ownership stores this session's token, and a key
-- bound to a session that is no longer live is stale at once (claim, sweep).
-- Sessions that really end are in test/t/052_session_binding.pl.
SELECT idem.stats_reset();
SHOW idem.bind_lock_to_session;
SELECT context, vartype FROM pg_settings WHERE name = 'idem.bind_lock_to_session';
SELECT kind FROM idem.claim_idempotency_key('bind', 'off', 'h');
SELECT bound_session IS NULL AS unbound FROM idem.idempotency_request
 WHERE scope = 'bind' AND key = 'off';
SET idem.bind_lock_to_session = on;
SELECT kind FROM idem.claim_idempotency_key('bind', 'on', 'h');
SELECT kind FROM idem.claim_or_wait('bind', 'on-too', 'h', interval '1 second');
-- One token per session, the same for every key it binds.
SELECT count(DISTINCT bound_session) AS tokens, bool_and(bound_session IS NOT NULL) AS bound
  FROM idem.idempotency_request WHERE scope = 'bind' AND key IN ('on', 'on-too');
-- This session lives: its key is in flight for a twin.
SELECT kind FROM idem.claim_idempotency_key('bind', 'on', 'h');
-- A key bound to a token no live session holds (as after its session ended,
-- a crash restart or a failover) is stale at once, lock or no lock.
UPDATE idem.idempotency_request SET bound_session = 42
 WHERE scope = 'bind' AND key = 'on';
SELECT kind, attempt_count, locked_until > now() + interval '4 minutes' AS fresh_lock
  FROM idem.claim_idempotency_key('bind', 'on', 'h');
SELECT bound_session IS NOT NULL AS rebound FROM idem.idempotency_request
 WHERE scope = 'bind' AND key = 'on';
-- The sweeper ends such a key at its next round, as abandoned.
UPDATE idem.idempotency_request SET bound_session = 42
 WHERE scope = 'bind' AND key = 'on-too';
SELECT idem.sweep_stale() >= 1 AS swept;
SELECT status, failure_code FROM idem.idempotency_request WHERE scope = 'bind' AND key = 'on-too';
-- An unbound key with a live lock is left alone by both.
SELECT kind FROM idem.claim_idempotency_key('bind', 'off', 'h');
SELECT session_bound_takeovers FROM idem.stats WHERE datname = current_database();
RESET idem.bind_lock_to_session;
DELETE FROM idem.idempotency_request WHERE scope = 'bind';
