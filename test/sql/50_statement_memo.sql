-- A claim is idempotent within one statement: (claim).* calls the function
-- once per column of idem.claim, and every call after the first must return
-- the first call's answer, not claim again.
CREATE FUNCTION memo_new_claims() RETURNS bigint LANGUAGE sql AS
$$ SELECT new_claim FROM idem.stats WHERE datname = current_database() $$;
SELECT memo_new_claims() AS before \gset

-- One (claim).*: a fence, the stored one, taken by exactly one claim.
SELECT (idem.claim_idempotency_key('memo', 'k1', 'h1')).* \gset c_
SELECT :'c_kind' AS kind, :'c_fence' = fence::text AS stored_fence, :'c_attempt_count' AS attempt_count,
       :'c_recovery_point' AS recovery_point, :'c_locked_until' = locked_until::text AS stored_lock
  FROM idem.idempotency_request WHERE scope = 'memo' AND key = 'k1';
SELECT memo_new_claims() - :before AS new_claims_counted;
SELECT attempt_count, status FROM idem.idempotency_request WHERE scope = 'memo' AND key = 'k1';

-- A separate statement claims separately: the key is taken.
SELECT kind, fence FROM idem.claim_idempotency_key('memo', 'k1', 'h1');

-- Other arguments are another claim, even in the same statement: the memo
-- never answers for a different request hash (P4002 here).
SELECT (idem.claim_idempotency_key('memo', 'k1', 'h1')).kind,
       (idem.claim_idempotency_key('memo', 'k1', 'other')).kind;

-- A statement that claims many different keys claims each one, once.
SELECT memo_new_claims() AS before \gset
SELECT count(*) AS claims, count(DISTINCT fence) AS distinct_fences,
       bool_and(kind = 'new_claim') AS all_new
  FROM (SELECT (idem.claim_idempotency_key('memo', 'many-' || i, 'h')).*
          FROM generate_series(1, 20) i) c;
SELECT memo_new_claims() - :before AS new_claims_counted;
SELECT count(*) AS rows_processing FROM idem.idempotency_request
 WHERE scope = 'memo' AND key LIKE 'many-%' AND status = 'processing' AND attempt_count = 1;

-- Keys repeated across the rows of one statement: each row is a claim of
-- its own (one answer per row). The first row of a key takes it, with the
-- stored fence; the later rows find it taken by this transaction
-- (processing_active, no fence), as separate statements would.
SELECT memo_new_claims() AS before \gset
CREATE TEMP TABLE repeated AS
  SELECT 'rep-' || (i % 3) AS key, (idem.claim_idempotency_key('memo', 'rep-' || (i % 3), 'h')).*
    FROM generate_series(1, 12) i;
SELECT memo_new_claims() - :before AS new_claims_counted;
SELECT count(DISTINCT c.key) AS keys, count(*) AS rows,
       count(*) FILTER (WHERE c.kind = 'new_claim') AS new_rows,
       bool_and(c.fence = r.fence) FILTER (WHERE c.kind = 'new_claim') AS new_rows_the_stored_fence,
       bool_and(c.kind = 'processing_active' AND c.fence IS NULL)
         FILTER (WHERE c.kind <> 'new_claim') AS later_rows_taken
  FROM repeated c JOIN idem.idempotency_request r ON r.scope = 'memo' AND r.key = c.key;

-- A replay through (claim).*: the stored response in every column.
SELECT idem.mark_succeeded('memo', 'k1', fence, 201, '{"id": 1}')
  FROM idem.idempotency_request WHERE scope = 'memo' AND key = 'k1';
SELECT kind, fence, response_code, response_body
  FROM (SELECT (idem.claim_idempotency_key('memo', 'k1', 'h1')).*) c;

-- Inside PL/pgSQL: (claim).* is one claim; two statements are two claims;
-- and a loop that claims again after its own write sees that write.
DO $$
DECLARE
  r idem.claim;
  first_claim idem.claim;
  second_claim idem.claim;
BEGIN
  SELECT (idem.claim_idempotency_key('memo', 'pl-1', 'h')).* INTO r;
  RAISE NOTICE 'plpgsql (claim).*: % fence %', r.kind,
    CASE WHEN r.fence IS NULL THEN 'missing' ELSE 'present' END;
  first_claim := idem.claim_idempotency_key('memo', 'pl-2', 'h');
  second_claim := idem.claim_idempotency_key('memo', 'pl-2', 'h');
  RAISE NOTICE 'plpgsql two statements: % then % (fence %)', first_claim.kind,
    second_claim.kind, CASE WHEN second_claim.fence IS NULL THEN 'none' ELSE 'given' END;
  PERFORM idem.mark_succeeded('memo', 'pl-2', first_claim.fence, 200, '{"done": true}');
  second_claim := idem.claim_idempotency_key('memo', 'pl-2', 'h');
  RAISE NOTICE 'plpgsql after completing: %', second_claim.kind;
END
$$;

-- Each transaction claims afresh: a rolled-back (claim).* leaves nothing,
-- and the next statement's claim is new.
BEGIN;
SELECT kind FROM (SELECT (idem.claim_idempotency_key('memo', 'tx', 'h')).*) c;
ROLLBACK;
SELECT kind, fence IS NOT NULL AS has_fence FROM (SELECT (idem.claim_idempotency_key('memo', 'tx', 'h')).*) c;

DROP TABLE repeated;
DROP FUNCTION memo_new_claims();
