-- Every idem function inside a READ ONLY transaction: each one that would
-- write refuses with 25006 (purge_expired deletes without the executor, so
-- it must check for itself), each one that only reads answers as usual (a
-- replay works read-only, docs/contract.md "Claiming a key"), and no table changes. The list of
-- calls is checked against pg_proc: a new VOLATILE function must be added.
TRUNCATE idem.idempotency_request, idem.consumed_message, idem.outbox_event;
SET idem.lock_timeout = '5min';

-- Keys in each state the calls need: a finished one (replays), one in
-- flight, one expired (the purge's), one whose lock ran out (the sweep's).
SELECT idem.mark_succeeded('ro', 'done', c.fence, 200, '{"ok": true}')
  FROM idem.claim_idempotency_key('ro', 'done', 'h') c;
SELECT kind FROM idem.claim_idempotency_key('ro', 'busy', 'h');
SELECT kind FROM idem.claim_idempotency_key('ro', 'stale', 'h');
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, response_code, created_at, updated_at, finished_at, expires_at)
VALUES ('ro', 'old', 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '3 days', 200, now() - interval '3 days', now() - interval '3 days',
    now() - interval '3 days', now() - interval '2 days');
UPDATE idem.idempotency_request
   SET claimed_at = now() - interval '2 hours', created_at = now() - interval '2 hours',
       updated_at = now() - interval '2 hours', locked_until = now() - interval '1 hour'
 WHERE scope = 'ro' AND key = 'stale';
-- The inbox and the outbox: a consumed message, an expired one, an event
-- waiting, a leased one and a published one long ago.
SELECT idem.consume_once('ro', 'm1', 'h');
INSERT INTO idem.consumed_message (consumer, message_id, message_hash, consumed_at, expires_at)
VALUES ('ro', 'm-old', 'h', now() - interval '3 days', now() - interval '2 days');
SELECT count(*) FROM idem.outbox_put('ro', 'e1', 'ro.happened', '{}');
SELECT count(*) FROM idem.outbox_put('ro', 'e2', 'ro.leased', '{}');
SELECT count(*) FROM idem.outbox_lease(1, '1 hour', ARRAY['ro.leased']);
SELECT count(*) FROM idem.outbox_put('ro', 'e3', 'ro.published', '{}');
UPDATE idem.outbox_event SET status = 'published', published_at = now() - interval '30 days',
       created_at = now() - interval '30 days', available_at = now() - interval '30 days'
 WHERE event_type = 'ro.published';

-- What each call returns, or its SQLSTATE and message.
CREATE FUNCTION pg_temp.outcome(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  result text;
BEGIN
  EXECUTE call INTO result;
  RETURN 'ok: ' || coalesce(result, '(null)');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE TEMP TABLE ro_calls (fn name, call text, ord serial);
INSERT INTO ro_calls (fn, call) VALUES
  -- readers: the documented answers
  ('claim_idempotency_key', $$SELECT kind FROM idem.claim_idempotency_key('ro', 'done', 'h')$$),
  ('claim_or_wait', $$SELECT kind FROM idem.claim_or_wait('ro', 'done', 'h', '1 second')$$),
  ('lookup', $$SELECT (r).status FROM idem.lookup('ro', 'done') r$$),
  ('stored_answer', $$SELECT kind FROM idem.stored_answer('ro', 'done')$$),
  ('peek', $$SELECT kind FROM idem.peek('ro', 'done')$$),
  ('peek', $$SELECT kind FROM idem.peek('ro', 'stale')$$),
  ('retry_after', $$SELECT idem.retry_after('ro', c) IS NOT NULL FROM idem.claim_idempotency_key('ro', 'done', 'h') c$$),
  ('typical_duration', $$SELECT idem.typical_duration('ro') IS NULL$$),
  ('consume_once', $$SELECT idem.consume_once('ro', 'm1', 'h')$$),
  ('worker_status', $$SELECT count(*) >= 0 FROM idem.worker_status()$$),
  ('stats_counters', $$SELECT count(*) > 0 FROM idem.stats_counters()$$),
  ('search_path_proof', $$SELECT count(*) = 0 FROM idem.search_path_proof() WHERE verdict = 'refused'$$),
  -- shared-memory counters, not data: resetting them writes no table
  ('stats_reset', $$SELECT idem.stats_reset()$$),
  -- writers: 25006
  ('claim_idempotency_key', $$SELECT kind FROM idem.claim_idempotency_key('ro', 'new', 'h')$$),
  ('claim_idempotency_key', $$SELECT kind FROM idem.claim_idempotency_key('ro', 'stale', 'h')$$),
  ('claim_or_wait', $$SELECT kind FROM idem.claim_or_wait('ro', 'new', 'h', '1 second')$$),
  ('mark_succeeded', $$SELECT idem.mark_succeeded('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), 200)$$),
  ('mark_succeeded_returning', $$SELECT kind FROM idem.mark_succeeded_returning('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), 200)$$),
  ('mark_failed', $$SELECT idem.mark_failed('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), true, 'oops')$$),
  ('mark_failed_returning', $$SELECT kind FROM idem.mark_failed_returning('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), false, 'oops')$$),
  ('set_recovery_point', $$SELECT idem.set_recovery_point('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), 'half')$$),
  ('extend_lock', $$SELECT idem.extend_lock('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'), '1 hour') IS NOT NULL$$),
  ('release', $$SELECT idem.release('ro', 'busy', (SELECT fence FROM idem.idempotency_request WHERE key = 'busy'))$$),
  ('purge_expired', $$SELECT idem.purge_expired()$$),
  ('sweep_stale', $$SELECT idem.sweep_stale()$$),
  ('evict', $$SELECT (r).key FROM idem.evict('ro', 'done') r$$),
  ('force_expire', $$SELECT (r).key FROM idem.force_expire('ro', 'done') r$$),
  ('consume_once', $$SELECT idem.consume_once('ro', 'm2', 'h')$$),
  ('set_consumed_result', $$SELECT idem.set_consumed_result('ro', 'm1', 'order', '1')$$),
  ('purge_consumed', $$SELECT idem.purge_consumed()$$),
  ('outbox_put', $$SELECT count(*) FROM idem.outbox_put('ro', 'e4', 'ro.happened', '{}')$$),
  ('outbox_lease', $$SELECT count(*) FROM idem.outbox_lease(10)$$),
  ('outbox_published', $$SELECT idem.outbox_published(id, lease_fence) FROM idem.outbox_event WHERE event_type = 'ro.leased'$$),
  ('outbox_failed', $$SELECT idem.outbox_failed(id, lease_fence, 'down') FROM idem.outbox_event WHERE event_type = 'ro.leased'$$),
  ('purge_published', $$SELECT idem.purge_published()$$),
  ('run_maintenance', $$SELECT idem.run_maintenance()$$),
  -- Citus's: without Citus they refuse (0A000) before anything else
  ('citus_distribute', $$SELECT idem.citus_distribute()$$),
  ('citus_node_setup', $$SELECT idem.citus_node_setup()$$),
  -- the triggers of idem.scope_policy run only on its writes
  ('scope_policy_check_completer', $$INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('ro', 3) RETURNING scope$$),
  ('scope_policy_changed', $$UPDATE idem.scope_policy SET max_attempts = 4 RETURNING scope$$),
  ('scope_policy_check_owner', $$DELETE FROM idem.scope_policy RETURNING scope$$),
  -- scopes owned by roles: the check reads; the owner table's triggers run
  -- only on its writes
  ('check_scope_owner', $$SELECT 'checked' FROM idem.check_scope_owner('ro')$$),
  ('may_use_scope', $$SELECT idem.may_use_scope('ro')$$),
  ('scope_owner_changed', $$INSERT INTO idem.scope_owner VALUES ('ro.', 'pg_monitor') RETURNING scope_prefix$$),
  ('scope_owner_audit', $$DELETE FROM idem.scope_owner RETURNING scope_prefix$$);

-- Every VOLATILE function of the extension is called above.
SELECT p.oid::regprocedure AS not_called_read_only
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.provolatile = 'v'
   AND NOT EXISTS (SELECT FROM ro_calls c WHERE c.fn = p.proname)
 ORDER BY 1;

CREATE TEMP TABLE before AS
SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY r.scope, r.key)) FROM idem.idempotency_request r) AS keys,
       (SELECT md5(string_agg(m::text, ',' ORDER BY m.consumer, m.message_id)) FROM idem.consumed_message m) AS inbox,
       (SELECT md5(string_agg(e::text, ',' ORDER BY e.id)) FROM idem.outbox_event e) AS outbox,
       (SELECT md5(string_agg(p::text, ',' ORDER BY p.scope)) FROM idem.scope_policy p) AS policies;

BEGIN TRANSACTION READ ONLY;
SELECT fn, pg_temp.outcome(call) AS outcome FROM ro_calls ORDER BY ord;
COMMIT;

-- Nothing changed.
SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY r.scope, r.key)) FROM idem.idempotency_request r) = b.keys AS keys_unchanged,
       (SELECT md5(string_agg(m::text, ',' ORDER BY m.consumer, m.message_id)) FROM idem.consumed_message m) = b.inbox AS inbox_unchanged,
       (SELECT md5(string_agg(e::text, ',' ORDER BY e.id)) FROM idem.outbox_event e) = b.outbox AS outbox_unchanged,
       (SELECT md5(string_agg(p::text, ',' ORDER BY p.scope)) FROM idem.scope_policy p) IS NOT DISTINCT FROM b.policies AS policies_unchanged
  FROM before b;

-- default_transaction_read_only makes every transaction READ ONLY: the same.
SET default_transaction_read_only = on;
SELECT idem.purge_expired();
SELECT idem.sweep_stale();
RESET default_transaction_read_only;

-- Writable again, the maintenance runs: the expired key and message go, the
-- stale key is swept.
SELECT idem.purge_expired() AS purged, idem.purge_consumed() AS purged_messages;
SELECT idem.sweep_stale() AS swept;
SELECT key, status, failure_code FROM idem.idempotency_request ORDER BY key;

TRUNCATE idem.idempotency_request, idem.consumed_message, idem.outbox_event;
RESET idem.lock_timeout;
