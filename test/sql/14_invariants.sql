-- The key table's invariants (1.1: one CHECK constraint calling
-- idem.request_invariants_hold, src/pure/row_invariants.cpp). idem's functions
-- never break them; a hand-written write that does is refused by the
-- database with 23514, naming the rule by its 1.0 constraint name.

-- One constraint, validated, over the columns the rules read.
SELECT conname, convalidated, pg_get_constraintdef(oid) AS definition
  FROM pg_constraint
 WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c';

-- A key in each state, written by idem's functions.
SELECT kind FROM idem.claim_idempotency_key('inv', 'p', 'h');
SELECT kind FROM idem.claim_idempotency_key('inv', 's', 'h');
SELECT idem.mark_succeeded('inv', 's', fence, 201, '{"id": 1}')
  FROM idem.idempotency_request WHERE scope = 'inv' AND key = 's';
SELECT kind FROM idem.claim_idempotency_key('inv', 'f', 'h');
SELECT idem.mark_failed('inv', 'f', fence, false, 'card_declined', 'declined', 402)
  FROM idem.idempotency_request WHERE scope = 'inv' AND key = 'f';
SELECT kind FROM idem.claim_idempotency_key('inv', 'r', 'h', lock_timeout => '1 hour');
SELECT age_key('inv', 'r', true, false);
SELECT idem.sweep_stale();
SELECT key, status, recovery_point, failure_code FROM idem.idempotency_request
 WHERE scope = 'inv' ORDER BY key;

-- Each rule, broken by a superuser's hand-written UPDATE, in 1.0's order.
SELECT error_of($$UPDATE idem.idempotency_request SET scope = '' WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET key = repeat('é', 256) WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET request_hash = '' WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET fence = 0 WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET attempt_count = 0 WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET recovery_point = '' WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET response_code = 600 WHERE scope = 'inv' AND key = 's'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET expires_at = created_at WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET recovery_point = 'finished' WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET response_body = '{}' WHERE scope = 'inv' AND key = 'p'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET locked_until = now() WHERE scope = 'inv' AND key = 'f'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET failure_code = 'x' WHERE scope = 'inv' AND key = 's'$$);
SELECT error_of($$UPDATE idem.idempotency_request SET failure_code = '' WHERE scope = 'inv' AND key = 'r'$$);

-- The boundaries that hold: 255 multibyte characters, the outermost HTTP
-- statuses, a key that never expires.
UPDATE idem.idempotency_request SET key = repeat('é', 255) WHERE scope = 'inv' AND key = 'p';
UPDATE idem.idempotency_request SET key = 'p' WHERE scope = 'inv' AND key = repeat('é', 255);
UPDATE idem.idempotency_request SET response_code = 100 WHERE scope = 'inv' AND key = 's';
UPDATE idem.idempotency_request SET response_code = 599 WHERE scope = 'inv' AND key = 's';
UPDATE idem.idempotency_request SET expires_at = 'infinity' WHERE scope = 'inv' AND key = 's';

-- An INSERT is judged too, and a statement over many rows fails as a whole
-- when one of them breaks a rule.
SELECT error_of($$INSERT INTO idem.idempotency_request
  (scope, key, request_hash, status, fence, claimed_at, created_at, updated_at, expires_at)
  VALUES ('inv', 'by-hand', 'h', 'processing', 99, now(), now(), now(), now() + interval '1 day')$$);
SELECT state_of($$UPDATE idem.idempotency_request SET finished_at = now() WHERE scope = 'inv'$$);
SELECT key, status, recovery_point, response_code, locked_until IS NOT NULL AS locked,
       finished_at IS NOT NULL AS finished, expires_at = 'infinity' AS forever
  FROM idem.idempotency_request WHERE scope = 'inv' ORDER BY key;

-- A role an operator let write the table has its rows judged the same way:
-- 23514, not a permission error for the constraint's function.
CREATE ROLE idem_operator;
GRANT USAGE ON SCHEMA idem TO idem_operator;
GRANT SELECT, UPDATE ON idem.idempotency_request TO idem_operator;
SET ROLE idem_operator;
SELECT state_of($$UPDATE idem.idempotency_request SET attempt_count = 0 WHERE scope = 'inv' AND key = 'p'$$);
UPDATE idem.idempotency_request SET claimed_by = 'operator' WHERE scope = 'inv' AND key = 'p';
RESET ROLE;
SELECT claimed_by FROM idem.idempotency_request WHERE scope = 'inv' AND key = 'p';
DROP OWNED BY idem_operator;
DROP ROLE idem_operator;

-- The keys go on through idem's functions: the owner of the swept key
-- completes it, the in-flight one fails and is taken over.
SELECT idem.mark_succeeded('inv', 'r', fence, 200)
  FROM idem.idempotency_request WHERE scope = 'inv' AND key = 'r';
SELECT idem.mark_failed('inv', 'p', fence, true, 'timeout')
  FROM idem.idempotency_request WHERE scope = 'inv' AND key = 'p';
SELECT kind FROM idem.claim_idempotency_key('inv', 'p', 'h');
SELECT key, status, recovery_point, failure_code FROM idem.idempotency_request
 WHERE scope = 'inv' ORDER BY key;

-- Called by hand: NULLs in what are NOT NULL columns are not judged (as a
-- CHECK lets a NULL result pass); NULLs in nullable columns are facts.
SELECT idem.request_invariants_hold(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                    NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS all_unknown;
SELECT state_of($$SELECT idem.request_invariants_hold('s', 'k', 'h', 'succeeded', 'finished',
  1, 1, NULL, NULL, NULL, NULL, NULL, now(), now(), 'infinity')$$) AS success_without_response;

DELETE FROM idem.idempotency_request WHERE scope = 'inv';
