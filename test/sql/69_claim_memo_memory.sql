-- The claim memo (src/keys/statement_memo.hpp) holds a few answers of the current
-- row only: its memory does not grow with the claims of a statement (before
-- 1.1: ~220 bytes a claim, held until the statement's end, so an
-- INSERT ... SELECT over 10 million keys would have held ~2 GB).
CREATE FUNCTION memo_bytes() RETURNS bigint LANGUAGE sql AS
$$ SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts WHERE name LIKE 'idem%memo' $$;
BEGIN;
-- 1,000 new keys, then 50,000 claims of them (each finds its key taken).
SELECT count(*) AS claims
  FROM generate_series(1, 1000) g, LATERAL idem.claim_idempotency_key('memo-memory', g::text, 'h') c;
SELECT memo_bytes() AS after_1000 \gset
SELECT count(*) AS claims, count(*) FILTER (WHERE kind = 'processing_active') AS taken
  FROM generate_series(1, 50000) g,
       LATERAL idem.claim_idempotency_key('memo-memory', (g % 1000 + 1)::text, 'h') c;
SELECT memo_bytes() AS after_50000 \gset
SELECT :after_1000 > 0 AS memo_in_use, :after_50000 = :after_1000 AS did_not_grow,
       :after_50000 <= 8192 AS at_most_8_kb;
-- (claim).*, one claim for the twelve calls of each row: the same.
SELECT count(*) AS claims
  FROM generate_series(1, 10000) g,
       LATERAL (SELECT (idem.claim_idempotency_key('memo-memory', (g % 1000 + 1)::text, 'h')).*) c;
SELECT memo_bytes() = :after_1000 AS did_not_grow;
ROLLBACK;
DROP FUNCTION memo_bytes();
