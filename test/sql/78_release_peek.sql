-- idem.release and idem.peek, and P4002's stored status (docs/contract.md
-- "Calls that adapters need"): an adapter forgets a key whose
-- handler failed, so a corrected request may run under it, and reads a key
-- by its name alone. Every answer and every refusal, with its SQLSTATE.
TRUNCATE idem.idempotency_request;
DELETE FROM idem.scope_policy;
SET idem.lock_timeout = '5min';

-- On the request path: definers with a pinned search_path, not for PUBLIC
-- (granted by hand with claim_idempotency_key: 10_privileges).
SELECT p.oid::regprocedure AS function, p.prosecdef,
       (p.proconfig IS NOT DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp'] OR p.proconfig IS NULL AND p.probin = '$libdir/idem') AS pinned_or_proven, p.provolatile,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p
 WHERE p.oid IN ('idem.release(text, text, bigint)'::regprocedure, 'idem.peek(text, text)'::regprocedure)
 ORDER BY p.proname;

-- ---- release ----
-- The owner gives its key up: the row goes; the next claim is new_claim with
-- any request hash, and its fence is above every fence before.
SELECT fence AS f1 FROM idem.claim_idempotency_key('rel', 'k', 'h1') \gset
SELECT idem.release('rel', 'k', :f1) AS released;
SELECT count(*) AS rows_left FROM idem.idempotency_request WHERE scope = 'rel' AND key = 'k';
SELECT fence AS f2, kind FROM idem.claim_idempotency_key('rel', 'k', 'h2') \gset
SELECT :'kind' AS kind_after_release, :f2 > :f1 AS fence_rose;
-- Released and claimed again many times: the fences keep rising, each above
-- the highest fence ever issued for any key.
CREATE TEMP TABLE rel_fences (round int, fence bigint, highest_before bigint);
DO $$
DECLARE f bigint; highest bigint;
BEGIN
  SELECT c.fence INTO f FROM idem.idempotency_request c WHERE c.scope = 'rel' AND c.key = 'k';
  FOR round IN 1..5 LOOP
    PERFORM idem.release('rel', 'k', f);
    highest := (SELECT last_value FROM idem.fence_seq);
    SELECT c.fence INTO f FROM idem.claim_idempotency_key('rel', 'k', 'h' || round) c;
    INSERT INTO rel_fences VALUES (round, f, highest);
  END LOOP;
END $$;
SELECT round, fence > highest_before AS above_every_fence_before,
       fence > lag(fence) OVER (ORDER BY round) AS above_the_last
  FROM rel_fences ORDER BY round;
SELECT fence AS f3 FROM rel_fences WHERE round = 5 \gset
-- The outcome of the new generation is the one replayed; the first
-- request's hash is now another request: P4002 with the stored status.
SELECT idem.mark_succeeded('rel', 'k', :f3, 201, '{"second": true}');
SELECT kind, fence, response_code, response_body FROM idem.claim_idempotency_key('rel', 'k', 'h5');
SELECT error_of($$SELECT idem.claim_idempotency_key('rel', 'k', 'h1')$$) AS first_hash_now;

-- The old owner of a released key: its key does not exist (P4010), or, once
-- claimed again, a newer fence owns it (P4012).
SELECT fence AS old FROM idem.claim_idempotency_key('rel', 'gone', 'h') \gset
SELECT idem.release('rel', 'gone', :old);
SELECT error_of(format($$SELECT idem.mark_succeeded('rel', 'gone', %s, 200)$$, :old)) AS mark_after_release;
SELECT error_of(format($$SELECT idem.release('rel', 'gone', %s)$$, :old)) AS released_twice;
SELECT kind FROM idem.claim_idempotency_key('rel', 'gone', 'other');
SELECT state_of(format($$SELECT idem.mark_succeeded('rel', 'gone', %s, 200)$$, :old)) AS old_owner_marks;
SELECT state_of(format($$SELECT idem.release('rel', 'gone', %s)$$, :old)) AS old_owner_releases;

-- A stale fence: the lock ran out and another request took the key over.
SELECT fence AS zombie FROM idem.claim_idempotency_key('rel', 'stale', 'h') \gset
SELECT age_key('rel', 'stale', true, false);
SELECT kind FROM idem.claim_idempotency_key('rel', 'stale', 'h');
SELECT state_of(format($$SELECT idem.release('rel', 'stale', %s)$$, :zombie)) AS stale_fence;
SELECT status FROM idem.idempotency_request WHERE scope = 'rel' AND key = 'stale';

-- Not owned (P4015): a finished key, whatever its outcome, and a fence the
-- key never had.
SELECT fence AS done FROM idem.claim_idempotency_key('rel', 'done', 'h') \gset
SELECT idem.mark_succeeded('rel', 'done', :done, 200);
SELECT state_of(format($$SELECT idem.release('rel', 'done', %s)$$, :done)) AS succeeded_key;
SELECT fence AS final FROM idem.claim_idempotency_key('rel', 'final', 'h') \gset
SELECT idem.mark_failed('rel', 'final', :final, false, 'declined');
SELECT state_of(format($$SELECT idem.release('rel', 'final', %s)$$, :final)) AS failed_final_key;
SELECT fence AS retry FROM idem.claim_idempotency_key('rel', 'retry', 'h') \gset
SELECT idem.mark_failed('rel', 'retry', :retry, true, 'timeout');
SELECT state_of(format($$SELECT idem.release('rel', 'retry', %s)$$, :retry)) AS failed_retryable_key;
SELECT fence AS busy FROM idem.claim_idempotency_key('rel', 'busy', 'h') \gset
SELECT state_of(format($$SELECT idem.release('rel', 'busy', %s)$$, :busy + 1000000)) AS fence_never_issued;
SELECT error_of(format($$SELECT idem.release('rel', 'done', %s)$$, :done))
       ~ 'status succeeded, your fence \d+\n' AS detail_says_why;
SELECT count(*) AS all_still_there FROM idem.idempotency_request
 WHERE scope = 'rel' AND key IN ('done', 'final', 'retry', 'busy');

-- Its owner may release a key whose lock ran out, not taken over since, and
-- one the sweeper declared abandoned, as it may complete it.
SELECT fence AS late FROM idem.claim_idempotency_key('rel', 'late', 'h') \gset
SELECT age_key('rel', 'late', true, false);
SELECT idem.release('rel', 'late', :late) AS released_after_lock_ran_out;
SELECT fence AS abandoned FROM idem.claim_idempotency_key('rel', 'abandoned', 'h') \gset
SELECT age_key('rel', 'abandoned', true, false);
SELECT idem.sweep_stale() AS swept;
SELECT status, failure_code FROM idem.idempotency_request WHERE scope = 'rel' AND key = 'abandoned';
SELECT idem.release('rel', 'abandoned', :abandoned) AS released_abandoned;
SELECT count(*) AS rows_left FROM idem.idempotency_request
 WHERE scope = 'rel' AND key IN ('late', 'abandoned');
SELECT kind FROM idem.claim_idempotency_key('rel', 'abandoned', 'another body');

-- Bad arguments: P4000, P4001, P4004 (NULL or non-positive fence).
SELECT error_of($$SELECT idem.release(NULL, 'k', 1)$$) AS null_scope;
SELECT error_of($$SELECT idem.release('', 'k', 1)$$) AS empty_scope;
SELECT error_of($$SELECT idem.release('rel', NULL, 1)$$) AS null_key;
SELECT error_of($$SELECT idem.release('rel', repeat('k', 256), 1)$$) AS long_key;
SELECT error_of($$SELECT idem.release('rel', 'busy', NULL)$$) AS null_fence;
SELECT error_of($$SELECT idem.release('rel', 'busy', 0)$$) AS zero_fence;
SELECT error_of($$SELECT idem.release('rel', 'missing', 1)$$) AS missing_key;

-- ---- P4002 names the stored status ----
SELECT fence AS bf FROM idem.claim_idempotency_key('p4002', 'processing', 'h') \gset
SELECT error_of($$SELECT idem.claim_idempotency_key('p4002', 'processing', 'other')$$) AS processing;
SELECT error_of($$SELECT idem.claim_idempotency_key('rel', 'done', 'other')$$) AS succeeded;
SELECT error_of($$SELECT idem.claim_idempotency_key('rel', 'retry', 'other')$$) AS failed_retryable;
SELECT error_of($$SELECT idem.claim_idempotency_key('rel', 'final', 'other')$$) AS failed_final;

-- ---- peek ----
-- What a claim with the stored hash would answer, without a fence.
CREATE TEMP TABLE peeks (key text, ord serial);
INSERT INTO peeks (key) VALUES ('done'), ('final'), ('retry'), ('busy'), ('stale'), ('missing');
SELECT p.key, c.kind, c.fence, c.attempt_count, c.recovery_point, c.response_code,
       c.response_body, c.failure_code, c.failure_message,
       c.locked_until IS NOT NULL AS has_lock, c.expires_at IS NOT NULL AS has_expiry,
       c IS NULL AS is_null
  FROM peeks p LEFT JOIN LATERAL idem.peek('rel', p.key) c ON true ORDER BY p.ord;
-- Each kind is what the claim answers (its fence aside).
SELECT p.key, (idem.peek('rel', p.key)).kind IS NOT DISTINCT FROM c.kind AS same_kind
  FROM peeks p, LATERAL (SELECT * FROM idem.claim_idempotency_key('rel', p.key, 'h')
                         WHERE p.key IN ('done', 'final', 'busy')) c
 ORDER BY p.ord;
-- A processing key reports its owner's lock, as processing_active does.
SELECT (idem.peek('rel', 'busy')).locked_until = locked_until AS owners_lock
  FROM idem.idempotency_request WHERE scope = 'rel' AND key = 'busy';
-- A key whose lock ran out reads processing_stale, with no fence (a claim
-- would take it over).
SELECT fence AS pf FROM idem.claim_idempotency_key('peek', 'stale', 'h') \gset
SELECT age_key('peek', 'stale', true, false);
SELECT kind, fence FROM idem.peek('peek', 'stale');
-- An abandoned key reads as the claim would take it: retryable_failure.
SELECT idem.sweep_stale() AS swept;
SELECT kind, fence, failure_code FROM idem.peek('peek', 'stale');
-- A finished key past its expiry reads as absent (NULL), as a claim starts
-- it afresh.
SELECT fence AS ef FROM idem.claim_idempotency_key('peek', 'expired', 'h') \gset
SELECT idem.mark_succeeded('peek', 'expired', :ef, 200);
SELECT age_key('peek', 'expired', false, true);
SELECT idem.peek('peek', 'expired') IS NULL AS expired_is_null;
SELECT fence AS rf FROM idem.claim_idempotency_key('peek', 'expired-retry', 'h') \gset
SELECT idem.mark_failed('peek', 'expired-retry', :rf, true, 'timeout');
SELECT age_key('peek', 'expired-retry', false, true);
SELECT idem.peek('peek', 'expired-retry') IS NULL AS expired_retryable_is_null;
-- A retryable failure at its scope's max_attempts: the claim would end the
-- key, so peek reads the final_failure it would record.
INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('peek-max', 1);
SELECT fence AS mf FROM idem.claim_idempotency_key('peek-max', 'k', 'h') \gset
SELECT idem.mark_failed('peek-max', 'k', :mf, true, 'timeout');
SELECT kind, fence, failure_code, failure_message FROM idem.peek('peek-max', 'k');
SELECT kind, fence, failure_code, failure_message FROM idem.claim_idempotency_key('peek-max', 'k', 'h');
DELETE FROM idem.scope_policy;
-- (f(...)).* is one peek.
SELECT p.kind, p.fence, p.attempt_count, p.recovery_point, p.response_code, p.locked_until
  FROM (SELECT (idem.peek('rel', 'done')).*) p;

-- peek writes nothing: no WAL, no transaction id, no changed row, and it
-- works in a READ ONLY transaction (70_read_only too).
SELECT wal_records_of($$SELECT * FROM idem.peek('peek', 'stale')$$) AS wal_of_stale,
       wal_records_of($$SELECT * FROM idem.peek('rel', 'busy')$$) AS wal_of_active,
       wal_records_of($$SELECT * FROM idem.peek('rel', 'done')$$) AS wal_of_replay;
CREATE TEMP TABLE before_peeks AS
SELECT md5(string_agg(r::text, ',' ORDER BY r.scope, r.key)) AS keys FROM idem.idempotency_request r;
BEGIN;
SET TRANSACTION READ ONLY;
SELECT p.key, (idem.peek('rel', p.key)).kind FROM peeks p ORDER BY p.ord;
SELECT kind, fence FROM idem.peek('peek', 'stale');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_transaction_id;
COMMIT;
SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY r.scope, r.key)) FROM idem.idempotency_request r)
       = b.keys AS keys_unchanged
  FROM before_peeks b;
-- It takes no ownership: the stale key is still there for a claim to take.
SELECT kind, fence > 0 AS owns FROM idem.claim_idempotency_key('peek', 'stale', 'h');

-- Bad arguments: P4000, P4001.
SELECT error_of($$SELECT idem.peek(NULL, 'k')$$) AS null_scope;
SELECT error_of($$SELECT idem.peek('rel', '')$$) AS empty_key;

TRUNCATE idem.idempotency_request;
RESET idem.lock_timeout;
