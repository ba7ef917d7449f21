-- idem.scope_policy (docs/contract.md "Per-scope policy"): precedence on every
-- call (an explicit argument, then the scope's policy, then the setting),
-- validation when a row is written, max_attempts, and who may write it.
SET idem.lock_timeout = '5min';
SET idem.retention = '1d';

-- Claims a key and shows the lock and the retention it was given.
CREATE FUNCTION claimed(p_scope text, p_key text, p_lock interval DEFAULT NULL,
                        p_retention interval DEFAULT NULL)
RETURNS TABLE (kind idem.claim_kind, lock interval, kept interval) LANGUAGE sql AS $$
  WITH c AS (SELECT * FROM idem.claim_idempotency_key(p_scope, p_key, 'h', NULL, p_lock, p_retention))
  SELECT c.kind, c.locked_until - r.claimed_at,
         CASE WHEN c.expires_at = 'infinity' THEN NULL ELSE c.expires_at - r.created_at END
    FROM c, idem.lookup(p_scope, p_key) r;
$$;

-- No policy: the settings.
SELECT * FROM claimed('pay', 'k0');

-- A policy row: in force at this session's next call.
INSERT INTO idem.scope_policy (scope, lock_timeout, retention)
VALUES ('pay', '30 seconds', '7 days');
SELECT * FROM claimed('pay', 'k1');
-- An explicit argument wins over the policy.
SELECT * FROM claimed('pay', 'k2', '2 minutes', '1 hour');
-- A column left NULL falls through to the setting; other scopes are untouched.
UPDATE idem.scope_policy SET lock_timeout = NULL WHERE scope = 'pay';
SELECT * FROM claimed('pay', 'k3');
SELECT * FROM claimed('cart', 'k1');
-- keep_forever: never expires, unless the call says otherwise.
UPDATE idem.scope_policy SET retention = NULL, keep_forever = true WHERE scope = 'pay';
SELECT * FROM claimed('pay', 'k4');  -- kept NULL: never expires
SELECT * FROM claimed('pay', 'k5', NULL, '1 hour');
-- A change rolled back is undone at once in this session too.
BEGIN;
UPDATE idem.scope_policy SET keep_forever = false WHERE scope = 'pay';
SELECT * FROM claimed('pay', 'k6');
ROLLBACK;
SELECT * FROM claimed('pay', 'k7');
-- A deleted row: the settings again.
DELETE FROM idem.scope_policy WHERE scope = 'pay';
SELECT * FROM claimed('pay', 'k8');
TRUNCATE idem.scope_policy;

-- Bad rows are refused when written, each with its constraint.
SELECT error_of($$INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('bad', '0 seconds')$$) AS zero_lock;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, retention) VALUES ('bad', '-1 day')$$) AS negative_retention;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('bad', 0)$$) AS zero_attempts;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer_delay) VALUES ('bad', '-1 second')$$) AS negative_delay;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, retention, keep_forever) VALUES ('bad', '1 day', true)$$) AS both_retentions;
SELECT error_of($$INSERT INTO idem.scope_policy (scope) VALUES ('')$$) AS empty_scope;
-- A completer needs the completer's signature.
CREATE FUNCTION wrong_args(text, text) RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION wrong_result(text, text, bigint, text, integer) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION good_completer(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('bad', 'wrong_args(text, text)')$$) AS wrong_args;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('bad', 'wrong_result(text, text, bigint, text, integer)')$$) AS wrong_result;
SELECT error_of($$UPDATE idem.scope_policy SET completer = 'wrong_args(text, text)'$$) AS no_rows_no_error;
INSERT INTO idem.scope_policy (scope, completer, completer_delay)
VALUES ('ok', 'good_completer(text, text, bigint, text, integer)', '1 minute');
SELECT scope, completer, completer_delay FROM idem.scope_policy;
SELECT error_of($$UPDATE idem.scope_policy SET completer = 'wrong_result(text, text, bigint, text, integer)' WHERE scope = 'ok'$$) AS bad_update;
TRUNCATE idem.scope_policy;

-- max_attempts: the claim that would start attempt 3 ends the key instead,
-- and every later claim replays that failure.
INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('poison', 2);
SELECT kind, attempt_count FROM idem.claim_idempotency_key('poison', 'p', 'h');
SELECT age_key('poison', 'p', true, false);
SELECT kind, attempt_count FROM idem.claim_idempotency_key('poison', 'p', 'h');
SELECT age_key('poison', 'p', true, false);
SELECT kind, fence, attempt_count, failure_code, failure_message
  FROM idem.claim_idempotency_key('poison', 'p', 'h');
SELECT kind, fence, failure_code FROM idem.claim_idempotency_key('poison', 'p', 'h');
SELECT status, attempt_count, failure_code, locked_until, finished_at IS NOT NULL AS finished
  FROM idem.idempotency_request WHERE scope = 'poison';
-- A retryable failure counts the same way.
SELECT kind FROM idem.claim_idempotency_key('poison', 'q', 'h');
SELECT idem.mark_failed('poison', 'q', (SELECT fence FROM idem.idempotency_request WHERE scope = 'poison' AND key = 'q'), true, 'gateway_timeout');
SELECT kind, attempt_count FROM idem.claim_idempotency_key('poison', 'q', 'h');
SELECT idem.mark_failed('poison', 'q', (SELECT fence FROM idem.idempotency_request WHERE scope = 'poison' AND key = 'q'), true, 'gateway_timeout');
SELECT kind, failure_code FROM idem.claim_idempotency_key('poison', 'q', 'h');
-- After expiry the key starts afresh, as any finished key does.
SELECT age_key('poison', 'p', false, true);
SELECT kind, attempt_count FROM idem.claim_idempotency_key('poison', 'p', 'h');
TRUNCATE idem.scope_policy;

-- Privileges: not PUBLIC; monitoring reads; a writer granted by an operator
-- may name only a completer whose owner it is a member of.
CREATE ROLE idem_policy_writer LOGIN;
CREATE ROLE idem_watcher LOGIN IN ROLE pg_monitor;
GRANT SELECT, INSERT, UPDATE, DELETE ON idem.scope_policy TO idem_policy_writer;
CREATE FUNCTION writer_completer(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
ALTER FUNCTION writer_completer(text, text, bigint, text, integer) OWNER TO idem_policy_writer;
SET ROLE idem_watcher;
SELECT count(*) AS monitor_reads FROM idem.scope_policy;
SELECT error_of($$INSERT INTO idem.scope_policy (scope) VALUES ('x')$$) AS monitor_writes;
RESET ROLE;
SET ROLE idem_policy_writer;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('w', 'good_completer(text, text, bigint, text, integer)')$$) AS superuser_completer;
INSERT INTO idem.scope_policy (scope, completer) VALUES ('w', 'writer_completer(text, text, bigint, text, integer)');
SELECT scope, completer FROM idem.scope_policy;
RESET ROLE;

TRUNCATE idem.scope_policy;
DROP FUNCTION writer_completer(text, text, bigint, text, integer);
REVOKE ALL ON idem.scope_policy FROM idem_policy_writer;
DROP ROLE idem_policy_writer;
DROP ROLE idem_watcher;
DROP FUNCTION claimed(text, text, interval, interval), wrong_args(text, text), wrong_result(text, text, bigint, text, integer),
    good_completer(text, text, bigint, text, integer);
-- PUBLIC has nothing.
CREATE ROLE idem_policy_nobody LOGIN;
SET ROLE idem_policy_nobody;
SELECT error_of($$SELECT count(*) FROM idem.scope_policy$$) AS public_reads;
RESET ROLE;
DROP ROLE idem_policy_nobody;
