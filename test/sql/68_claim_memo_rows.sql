-- One answer per row (src/keys/statement_memo.hpp): the columns of one row share
-- one call; a new row, a new statement or any write by idem is a new call.
CREATE FUNCTION memo_rows_count(counter text) RETURNS bigint LANGUAGE sql AS
$$ SELECT (row_to_json(s)->>counter)::bigint FROM idem.stats s WHERE datname = current_database() $$;

-- (mark_succeeded_returning(...)).* marks once: every column is the one
-- answer, and the key is marked once (before 1.1, the second
-- column's call found the key finished, P4010).
SELECT fence AS f1 FROM idem.claim_idempotency_key('memo-rows', 'marked-1', 'h') \gset
SELECT memo_rows_count('marked_succeeded') AS before \gset
SELECT m.kind, m.fence, m.attempt_count, m.recovery_point, m.response_code, m.response_body,
       m.locked_until, m.expires_at = r.expires_at AS stored_expiry
  FROM (SELECT (idem.mark_succeeded_returning('memo-rows', 'marked-1', :f1, 201, '{"id": 1}')).*) m,
       idem.idempotency_request r
 WHERE r.scope = 'memo-rows' AND r.key = 'marked-1';
SELECT memo_rows_count('marked_succeeded') - :before AS marks_counted;
-- mark_failed_returning, retryable and final, the same way (P4011 before).
SELECT fence AS f2 FROM idem.claim_idempotency_key('memo-rows', 'marked-2', 'h') \gset
SELECT fence AS f3 FROM idem.claim_idempotency_key('memo-rows', 'marked-3', 'h') \gset
SELECT memo_rows_count('marked_failed_retryable') AS before_retryable,
       memo_rows_count('marked_failed_final') AS before_final \gset
SELECT kind, fence, attempt_count, failure_code, failure_message, response_code
  FROM (SELECT (idem.mark_failed_returning('memo-rows', 'marked-2', :f2, true, 'timeout')).*) m;
SELECT kind, fence, failure_code, response_code, response_body
  FROM (SELECT (idem.mark_failed_returning('memo-rows', 'marked-3', :f3, false, 'declined',
                                           'card declined', 402, '{"e": 1}')).*) m;
SELECT memo_rows_count('marked_failed_retryable') - :before_retryable AS retryable_counted,
       memo_rows_count('marked_failed_final') - :before_final AS final_counted;
-- Several keys marked by one statement: each row marks its own key once.
SELECT count(*) AS fences FROM (
  SELECT (idem.claim_idempotency_key('memo-rows', 'many-' || i, 'h')).fence
    FROM generate_series(1, 5) i) c;
SELECT memo_rows_count('marked_succeeded') AS before \gset
SELECT key, (idem.mark_succeeded_returning(scope, key, fence, 200)).kind,
       (idem.mark_succeeded_returning(scope, key, fence, 200)).fence,
       (idem.mark_succeeded_returning(scope, key, fence, 200)).response_code
  FROM idem.idempotency_request WHERE scope = 'memo-rows' AND key LIKE 'many-%' ORDER BY key;
SELECT memo_rows_count('marked_succeeded') - :before AS marks_counted;

-- A claim after a write, inside a STABLE PL/pgSQL function (one snapshot,
-- one command id): the second claim is a new claim, which sees the outcome
-- (before 1.1 it answered new_claim with the first fence again).
CREATE FUNCTION memo_claim_mark_claim(k text) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
  c idem.claim;
  d idem.claim;
BEGIN
  c := idem.claim_idempotency_key('memo-rows', k, 'h');
  PERFORM idem.mark_succeeded('memo-rows', k, c.fence, 200);
  d := idem.claim_idempotency_key('memo-rows', k, 'h');
  RETURN c.kind || ' then ' || d.kind || CASE WHEN d.fence IS NULL THEN ', no fence'
                                              WHEN d.fence = c.fence THEN ', the same fence'
                                              ELSE ', another fence' END;
END
$$;
SELECT memo_claim_mark_claim('stable');
-- The same in an IMMUTABLE one, with an eviction between: the key is gone,
-- so the second claim takes it anew, under a new fence.
CREATE FUNCTION memo_claim_evict_claim(k text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  c idem.claim;
  d idem.claim;
BEGIN
  c := idem.claim_idempotency_key('memo-rows', k, 'h');
  PERFORM idem.mark_succeeded('memo-rows', k, c.fence, 200);
  PERFORM idem.evict('memo-rows', k);
  d := idem.claim_idempotency_key('memo-rows', k, 'h');
  RETURN c.kind || ' then ' || d.kind || CASE WHEN d.fence IS NULL THEN ', no fence'
                                              WHEN d.fence = c.fence THEN ', the same fence'
                                              ELSE ', another fence' END;
END
$$;
SELECT memo_claim_evict_claim('immutable');
-- One statement, claim -> mark -> claim through MATERIALIZED CTEs.
WITH c AS MATERIALIZED (SELECT * FROM idem.claim_idempotency_key('memo-rows', 'cte', 'h')),
     m AS MATERIALIZED (SELECT idem.mark_succeeded('memo-rows', 'cte', c.fence, 200) FROM c),
     d AS MATERIALIZED (SELECT x.* FROM m, idem.claim_idempotency_key('memo-rows', 'cte', 'h') x)
SELECT c.kind AS first_kind, d.kind AS second_kind, d.fence IS NULL AS second_has_no_fence
  FROM c, d;

-- Within one row, any write by idem between two calls ends the reuse, even a
-- write to another key: the second call claims again. Without a write, the
-- row's two calls are one claim.
SELECT (idem.claim_idempotency_key('memo-rows', 'row-write', 'h')).fence IS NOT NULL AS first_has_fence,
       idem.sweep_stale() >= 0 AS swept,
       (idem.claim_idempotency_key('memo-rows', 'row-write', 'h')).kind AS second_kind,
       (idem.claim_idempotency_key('memo-rows', 'row-write', 'h')).fence IS NULL AS second_has_no_fence;
SELECT (idem.claim_idempotency_key('memo-rows', 'row-none', 'h')).fence AS first_fence,
       pg_catalog.now() IS NOT NULL AS no_write,
       (idem.claim_idempotency_key('memo-rows', 'row-none', 'h')).fence AS second_fence \gset
SELECT :first_fence = :second_fence AS one_claim;
-- Each write idem makes, between two claims of a completed key (replays,
-- which write nothing and leave the command id unused): a claim counted
-- twice is a claim made again. A claim that finds its key taken writes
-- nothing.
CREATE TABLE memo_writes (write text, sql text);
INSERT INTO memo_writes VALUES
  ('none', 'pg_catalog.now()'),
  ('mark_succeeded', 'idem.mark_succeeded(''memo-rows'', ''w-mark_succeeded-other'', :fence, 200)'),
  ('mark_failed', 'idem.mark_failed(''memo-rows'', ''w-mark_failed-other'', :fence, true, ''x'')'),
  ('set_recovery_point', 'idem.set_recovery_point(''memo-rows'', ''w-set_recovery_point-other'', :fence, ''p'')'),
  ('extend_lock', 'idem.extend_lock(''memo-rows'', ''w-extend_lock-other'', :fence, interval ''1 hour'')'),
  ('evict', 'idem.evict(''memo-rows'', ''w-evict-other'', true)'),
  ('force_expire', 'idem.force_expire(''memo-rows'', ''w-force_expire-other'', true)'),
  ('purge_expired', 'idem.purge_expired()'),
  ('sweep_stale', 'idem.sweep_stale()'),
  ('a claim that takes a key', 'idem.claim_idempotency_key(''memo-rows'', ''w-new'', ''h'')'),
  ('a claim that takes no key', 'idem.claim_idempotency_key(''memo-rows'', ''w-a claim that takes no key-other'', ''h'')');
CREATE FUNCTION memo_claim_write_claim(w text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  k text := 'w-' || w;
  other_fence bigint;
  statement text;
  replays_before bigint;
  ignored text;
BEGIN
  PERFORM idem.mark_succeeded('memo-rows', k,
                              (idem.claim_idempotency_key('memo-rows', k, 'h')).fence, 200);
  other_fence := (idem.claim_idempotency_key('memo-rows', k || '-other', 'h')).fence;
  SELECT replace(sql, ':fence', other_fence::text) INTO statement FROM memo_writes WHERE write = w;
  replays_before := memo_rows_count('replay_success');
  -- One row: the claim, the write, the same claim again.
  EXECUTE format('SELECT (idem.claim_idempotency_key(%L, %L, ''h'')).kind, %s,
                         (idem.claim_idempotency_key(%L, %L, ''h'')).kind',
                 'memo-rows', k, statement, 'memo-rows', k)
     INTO ignored, ignored, ignored;
  RETURN memo_rows_count('replay_success') - replays_before;
END
$$;
SELECT write, memo_claim_write_claim(write) AS replays_counted FROM memo_writes ORDER BY write;

-- A PL/pgSQL loop that claims at one call site claims each time: the second
-- and third iterations find the key this transaction took.
DO $$
DECLARE
  c idem.claim;
BEGIN
  FOR i IN 1..3 LOOP
    c := idem.claim_idempotency_key('memo-rows', 'loop', 'h');
    RAISE NOTICE 'iteration %: % (fence %)', i, c.kind,
      CASE WHEN c.fence IS NULL THEN 'none' ELSE 'given' END;
  END LOOP;
END
$$;
-- Two call sites, two statements: the second claims again.
DO $$
DECLARE
  c idem.claim;
  d idem.claim;
BEGIN
  c := idem.claim_idempotency_key('memo-rows', 'two-sites', 'h');
  d := idem.claim_idempotency_key('memo-rows', 'two-sites', 'h');
  RAISE NOTICE 'first %, second % (fence %)', c.kind, d.kind,
    CASE WHEN d.fence IS NULL THEN 'none' ELSE 'given' END;
END
$$;
-- The same claim in each row of one statement: a claim per row, the first
-- takes the key, the next find it taken; each row's columns agree.
SELECT g, (idem.claim_idempotency_key('memo-rows', 'rows', 'h')).kind,
       (idem.claim_idempotency_key('memo-rows', 'rows', 'h')).fence IS NOT NULL AS has_fence
  FROM generate_series(1, 3) g;

DROP FUNCTION memo_claim_write_claim(text);
DROP TABLE memo_writes;
DROP FUNCTION memo_claim_evict_claim(text);
DROP FUNCTION memo_claim_mark_claim(text);
DROP FUNCTION memo_rows_count(text);
DELETE FROM idem.idempotency_request WHERE scope = 'memo-rows';
