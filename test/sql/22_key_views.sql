-- idem.key_health and idem.key_summary: exact numbers on a known set of
-- keys, and key_health reads the partial indexes, not the table.
-- Scope kv-a: 2 succeeded (1 expired), 1 failed_retryable, 1 failed_final
-- (expired), 3 processing (1 stuck). Scope kv-b: 1 stuck processing key.
SELECT fence AS f FROM idem.claim_idempotency_key('kv-a', 's1', 'h') \gset
SELECT idem.mark_succeeded('kv-a', 's1', :f, 200);
SELECT fence AS f FROM idem.claim_idempotency_key('kv-a', 's2', 'h') \gset
SELECT idem.mark_succeeded('kv-a', 's2', :f, 200);
SELECT age_key('kv-a', 's2', lock_over => false, expired => true);
SELECT fence AS f FROM idem.claim_idempotency_key('kv-a', 'r1', 'h') \gset
SELECT idem.mark_failed('kv-a', 'r1', :f, true, 'timeout');
SELECT fence AS f FROM idem.claim_idempotency_key('kv-a', 'x1', 'h') \gset
SELECT idem.mark_failed('kv-a', 'x1', :f, false, 'declined');
SELECT age_key('kv-a', 'x1', lock_over => false, expired => true);
SELECT count(*) AS in_flight FROM generate_series(1, 3) g, LATERAL idem.claim_idempotency_key('kv-a', 'p' || g, 'h');
SELECT age_key('kv-a', 'p1', lock_over => true, expired => false);
SELECT kind FROM idem.claim_idempotency_key('kv-b', 'p1', 'h');
SELECT age_key('kv-b', 'p1', lock_over => true, expired => false);
-- The oldest in-flight claim of kv-a was made an hour ago.
UPDATE idem.idempotency_request SET claimed_at = now() - interval '1 hour'
 WHERE scope = 'kv-a' AND key = 'p2';

SELECT scope, processing, stuck, oldest_processing_age >= interval '1 hour' AS hour_old,
       expired_unpurged, oldest_expired_age > interval '0' AS expired_age_positive
  FROM idem.key_health WHERE scope LIKE 'kv-%' ORDER BY scope;
SELECT scope, total, processing, succeeded, failed_retryable, failed_final, stuck,
       oldest_processing_age >= interval '1 hour' AS hour_old, expired_unpurged
  FROM idem.key_summary WHERE scope LIKE 'kv-%' ORDER BY scope;
-- After the sweeper and the purger, nothing needs attention in kv-b and kv-a
-- has only its two live in-flight keys.
SELECT idem.sweep_stale() >= 2 AS swept, idem.purge_expired() >= 2 AS purged;
SELECT scope, processing, stuck, expired_unpurged FROM idem.key_health WHERE scope LIKE 'kv-%' ORDER BY scope;
SELECT scope, total, processing, succeeded, failed_retryable, failed_final
  FROM idem.key_summary WHERE scope LIKE 'kv-%' ORDER BY scope;

-- key_health's plan: the sweep index for in-flight keys, the purge index for
-- expired ones, no pass over the table. (The planner would scan a table this
-- small sequentially; docs/operating.md shows the plan it picks at 1M rows.)
CREATE FUNCTION plan_of(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
  plan text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    plan := plan || line || E'\n';
  END LOOP;
  RETURN plan;
END $$;
-- Statistics as ANALYZE leaves them, not as autovacuum may or may not have
-- left them by now: the plan must not depend on the server's load.
ANALYZE idem.idempotency_request;
SET enable_seqscan = off;
SELECT plan_of('SELECT * FROM idem.key_health') ~ 'idempotency_request_sweep_idx' AS uses_sweep_index,
       plan_of('SELECT * FROM idem.key_health') ~ 'idempotency_request_purge_idx' AS uses_purge_index,
       plan_of('SELECT * FROM idem.key_health') !~ 'Seq Scan' AS no_seq_scan;
RESET enable_seqscan;
DROP FUNCTION plan_of(text);
