-- claim_or_wait is idempotent within one statement, as claim_idempotency_key
-- is (test/sql/50_statement_memo.sql): (claim_or_wait(...)).* calls the function
-- once per column of idem.claim, and only the first call may claim.
CREATE FUNCTION wait_memo_new_claims() RETURNS bigint LANGUAGE sql AS
$$ SELECT new_claim FROM idem.stats WHERE datname = current_database() $$;
SELECT wait_memo_new_claims() AS before \gset

SELECT (idem.claim_or_wait('wait-memo', 'k1', 'h1', interval '1 second')).* \gset c_
SELECT :'c_kind' AS kind, :'c_fence' = fence::text AS stored_fence,
       :'c_attempt_count' AS attempt_count
  FROM idem.idempotency_request WHERE scope = 'wait-memo' AND key = 'k1';
SELECT wait_memo_new_claims() - :before AS new_claims_counted;

-- A separate statement claims again: the key is taken (by this session), so
-- it waits out its max_wait and reports the key in flight, with no fence.
SELECT kind, fence IS NULL AS no_fence
  FROM idem.claim_or_wait('wait-memo', 'k1', 'h1', interval '50 milliseconds');

-- The two claim functions are two claims, even in one statement.
SELECT (idem.claim_or_wait('wait-memo', 'k2', 'h', interval '1 second')).kind AS waited,
       (idem.claim_idempotency_key('wait-memo', 'k2', 'h')).kind AS plain;

DROP FUNCTION wait_memo_new_claims();
DELETE FROM idem.idempotency_request WHERE scope = 'wait-memo';
