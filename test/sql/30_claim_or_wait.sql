-- idem.claim_or_wait: the answers it gives at once, its argument checks, and
-- the waits one session can show (it waits for a key it owns itself, which
-- only max_wait or a timeout can end). The waits between sessions are in
-- test/specs/wait_for_twin.spec and test/t/050_wait_latency.pl.
SELECT idem.stats_reset();

-- No row: a new claim, with a fence, as claim_idempotency_key gives.
SELECT kind, fence IS NOT NULL AS owns, attempt_count, recovery_point
  FROM idem.claim_or_wait('wait', 'new', 'h', interval '5 seconds');
SELECT fence AS f FROM idem.idempotency_request WHERE scope = 'wait' AND key = 'new' \gset
-- Finished keys answer at once.
SELECT idem.mark_succeeded('wait', 'new', :f, 201, '{"id": 1}');
SELECT kind, fence, response_code, response_body
  FROM idem.claim_or_wait('wait', 'new', 'h', interval '5 seconds');
SELECT fence AS g FROM idem.claim_or_wait('wait', 'final', 'h', interval '5 seconds') \gset
SELECT idem.mark_failed('wait', 'final', :g, false, 'card_declined', 'no', 402);
SELECT kind, fence, failure_code, response_code
  FROM idem.claim_or_wait('wait', 'final', 'h', interval '5 seconds');
-- A retryable failure is taken over at once.
SELECT fence AS r FROM idem.claim_or_wait('wait', 'retry', 'h', interval '5 seconds') \gset
SELECT idem.mark_failed('wait', 'retry', :r, true, 'timeout');
SELECT kind, fence > :r AS newer, attempt_count
  FROM idem.claim_or_wait('wait', 'retry', 'h', interval '5 seconds');
-- A different request is refused before any wait.
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'new', 'other', interval '5 seconds')$$);

-- In flight (this session owns 'busy'): max_wait runs out, then the answer
-- is processing_active with the owner's lock, as claim_idempotency_key says.
SELECT fence AS b FROM idem.claim_or_wait('wait', 'busy', 'h', interval '5 seconds') \gset
SELECT kind, fence, locked_until > now() AS locked,
       clock_timestamp() - statement_timestamp() >= interval '200 milliseconds' AS waited
  FROM idem.claim_or_wait('wait', 'busy', 'h', interval '200 milliseconds');
-- A lock that runs out during the wait: taken over as processing_stale.
SELECT fence AS s FROM idem.claim_or_wait('wait', 'short', 'h', interval '1 second', NULL,
                                          interval '300 milliseconds') \gset
SELECT kind, fence > :s AS newer, attempt_count
  FROM idem.claim_or_wait('wait', 'short', 'h', interval '30 seconds');
-- statement_timeout ends a wait with its own error, and the session goes on.
SET statement_timeout = '300ms';
SELECT kind FROM idem.claim_or_wait('wait', 'busy', 'h', interval '1 hour');
SELECT kind FROM idem.claim_idempotency_key('wait', 'busy', 'h');
RESET statement_timeout;
-- REPEATABLE READ cannot see the outcome it would wait for: it answers at once.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL statement_timeout = '10s';
SELECT kind FROM idem.claim_or_wait('wait', 'busy', 'h', interval '1 hour');
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SET LOCAL statement_timeout = '10s';
SELECT kind FROM idem.claim_or_wait('wait', 'busy', 'h', interval '1 hour');
COMMIT;

-- Arguments: max_wait must be given, finite and positive (P4004); the rest
-- as claim_idempotency_key checks them.
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', NULL)$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', interval '0')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', interval '-1 second')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', interval '1 mon -31 days')$$);
SELECT error_of($$SELECT idem.claim_or_wait('', 'k', 'h', interval '1 second')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', NULL, 'h', interval '1 second')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', '', interval '1 second')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', interval '1 second', NULL, interval '0')$$);
SELECT error_of($$SELECT idem.claim_or_wait('wait', 'k', 'h', interval '1 second', NULL, NULL, interval '-1 day')$$);
-- claimed_by and the intervals are stored as a claim stores them.
SELECT kind FROM idem.claim_or_wait('wait', 'by', 'h', interval '1 second', 'worker-7',
                                    interval '2 minutes', interval '3 days');
SELECT claimed_by, locked_until - claimed_at AS lock, expires_at - created_at AS kept
  FROM idem.idempotency_request WHERE scope = 'wait' AND key = 'by';

-- The counters: three waits ('busy' ran out of max_wait, 'short' was
-- answered, 'busy' again was cancelled, which counts as started only).
SELECT waits_started, waits_answered, waits_timed_out, polling_fallbacks,
       mean_wait_ms > 0 AS timed
  FROM idem.stats WHERE datname = current_database();

-- Not for PUBLIC: granted by hand, as claim_idempotency_key is.
SELECT has_function_privilege('public', 'idem.claim_or_wait(text, text, text, interval, text, interval, interval)', 'EXECUTE') AS public_may_wait;
SELECT prosecdef, (proconfig IS NOT DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp'] OR proconfig IS NULL AND probin = '$libdir/idem') AS pinned_or_proven
  FROM pg_proc WHERE oid = 'idem.claim_or_wait'::regproc;
DELETE FROM idem.idempotency_request WHERE scope = 'wait';
