-- idem.retry_after: what to send a twin in Retry-After. The scope's
-- requests are made to have taken a known time by moving claimed_at back
-- before completing them (as a superuser may), so no test sleeps.
CREATE FUNCTION complete_after(p_scope text, p_key text, took interval) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  c idem.claim;
BEGIN
  c := idem.claim_idempotency_key(p_scope, p_key, 'h');
  UPDATE idem.idempotency_request SET claimed_at = claimed_at - took
   WHERE scope = p_scope AND key = p_key;
  PERFORM idem.mark_succeeded(p_scope, p_key, c.fence, 200);
END
$$;

-- Nothing known yet: 1 second, the smallest Retry-After.
SELECT idem.typical_duration('fast') AS unknown;
SELECT kind FROM idem.claim_idempotency_key('fast', 'busy', 'h');
SELECT kind, idem.retry_after('fast', c) AS retry_after
  FROM idem.claim_idempotency_key('fast', 'busy', 'h') c;

-- A scope whose requests take about 100 ms: 1 second, not the 300 left of
-- the owner's five-minute lock.
SELECT complete_after('fast', 'done-' || i, interval '100 ms') FROM generate_series(1, 5) i;
SELECT idem.typical_duration('fast') BETWEEN interval '100 ms' AND interval '150 ms' AS about_100_ms;
SELECT kind, idem.retry_after('fast', c) AS retry_after,
       ceil(extract(epoch FROM c.locked_until - now())) > 290 AS lock_has_minutes_left
  FROM idem.claim_idempotency_key('fast', 'busy', 'h') c;

-- A scope whose requests take about 2.5 s: 3 seconds (rounded up).
SELECT complete_after('slow', 'done-' || i, interval '2.5 s') FROM generate_series(1, 3) i;
SELECT c.kind, idem.retry_after('slow', c) AS retry_after
  FROM idem.claim_idempotency_key('slow', 'busy', 'h') c;
SELECT c.kind, idem.retry_after('slow', c) AS retry_after
  FROM idem.claim_idempotency_key('slow', 'busy', 'h') c;

-- Never past the end of the lock: requests take a minute, the lock ends in
-- at most 10 seconds.
SELECT complete_after('long', 'done', interval '60 s');
SELECT kind FROM idem.claim_idempotency_key('long', 'busy', 'h', NULL, interval '10 s');
SELECT c.kind, idem.retry_after('long', c) BETWEEN 1 AND 10 AS within_the_lock
  FROM idem.claim_idempotency_key('long', 'busy', 'h', NULL, interval '10 s') c;
-- ...and 0 once the lock has run out (a retry takes the key over at once).
SELECT idem.retry_after('long', ROW('processing_active', NULL, 1, 'started', NULL, NULL, NULL,
                                    NULL, NULL, NULL, now() - interval '1 s', NULL)::idem.claim)
       AS lock_over;

-- Kinds with nothing to wait for: NULL.
SELECT c.kind, idem.retry_after('fast', c) AS retry_after
  FROM idem.claim_idempotency_key('fast', 'done-1', 'h') c;
SELECT c.kind, idem.retry_after('fast', c) AS retry_after
  FROM idem.claim_idempotency_key('fast', 'new', 'h') c;

-- The estimate is per scope, and per database (the scope's name alone in
-- another database is another scope).
SELECT idem.typical_duration('never-seen') IS NULL AS unknown_scope;

-- Nothing for PUBLIC.
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_run
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace
   AND p.proname IN ('typical_duration', 'retry_after', 'mark_succeeded_returning',
                     'mark_failed_returning', 'stored_answer')
 ORDER BY p.proname;

DROP FUNCTION complete_after(text, text, interval);
