-- The transactional outbox: put in the caller's transaction, idempotent per
-- (scope, key, event_type); lease in id order per aggregate, one at a time;
-- fenced published/failed; backoff, dead, purge; the operator's summary.
\set VERBOSITY default
\set SHOW_CONTEXT never

-- Put: the id, the same id again, P4051 for another payload.
SELECT idem.outbox_put('orders', 'k1', 'receipt', '{"order": 1}', 'order', '1') AS e1 \gset
SELECT idem.outbox_put('orders', 'k1', 'receipt', '{"order": 1}', 'order', '1') = :e1 AS same_id;
SELECT idem.outbox_put('orders', 'k1', 'receipt', '{"order": 2}', 'order', '1');
SELECT idem.outbox_put('orders', 'k1', 'shipped', '{"order": 1}', 'order', '1') > :e1 AS other_type_new_event;
-- The delivery key is request_hash of [scope, key, event_type].
SELECT delivery_key = idem.request_hash('["orders", "k1", "receipt"]'::jsonb) AS delivery_key_stable,
       status, attempt_count
  FROM idem.outbox_event WHERE id = :e1;

-- A rolled-back put leaves nothing.
BEGIN;
SELECT idem.outbox_put('orders', 'rolled back', 'receipt', '{}') IS NOT NULL AS put;
ROLLBACK;
SELECT count(*) AS rolled_back_events FROM idem.outbox_event WHERE key = 'rolled back';

-- (The commit's NOTIFY idem_outbox: test/specs/outbox_put_vs_rollback.spec.)
SELECT idem.outbox_put('orders', 'k2', 'receipt', '{"order": 2}', 'order', '2') IS NOT NULL AS put;

-- Per aggregate: order 1 has receipt then shipped; only receipt is due.
-- Order 2's receipt is due too. An event without an aggregate is never held.
SELECT idem.outbox_put('orders', 'k3', 'audit', '{}') IS NOT NULL AS put;
SELECT key, event_type, attempt_count, lease_fence > 0 AS fenced
  FROM idem.outbox_lease(10, '1 minute') ORDER BY id;
-- Everything due is leased now: nothing more, shipped waits for receipt.
SELECT count(*) AS leased_again FROM idem.outbox_lease(10, '1 minute');
SELECT lease_fence AS f1 FROM idem.outbox_event WHERE id = :e1 \gset
SELECT idem.outbox_published(:e1, :f1);
SELECT status, published_at IS NOT NULL AS dated, lease_fence FROM idem.outbox_event WHERE id = :e1;
-- Now order 1's shipped event is next.
SELECT key, event_type FROM idem.outbox_lease(10, '1 minute');
-- Publishing twice, or with a wrong fence: the lease is lost (P4012).
SELECT idem.outbox_published(:e1, :f1);
SELECT lease_fence AS fs, id AS es FROM idem.outbox_event WHERE event_type = 'shipped' \gset
SELECT idem.outbox_published(:es, :fs + 1000);
SELECT idem.outbox_failed(:es, :fs + 1000, 'timeout');
SELECT idem.outbox_published(-1, 1);

-- event_types filters.
SELECT idem.outbox_put('orders', 'k4', 'refund', '{}') IS NOT NULL AS put;
SELECT count(*) AS receipts_due FROM idem.outbox_lease(10, '1 minute', ARRAY['receipt']);
SELECT event_type FROM idem.outbox_lease(10, '1 minute', ARRAY['refund']);

-- An expired lease is leased again with a new fence; the old fence is lost.
UPDATE idem.outbox_event SET leased_until = now() - interval '1 second' WHERE id = :es;
SELECT lease_fence > :fs AS new_fence, attempt_count FROM idem.outbox_lease(10, '1 minute');
SELECT idem.outbox_published(:es, :fs);
-- An expired lease not yet taken by anyone may still be marked by its relay.
SELECT lease_fence AS fs2 FROM idem.outbox_event WHERE id = :es \gset
UPDATE idem.outbox_event SET leased_until = now() - interval '1 second' WHERE id = :es;
SELECT idem.outbox_published(:es, :fs2);

-- Failure: exponential backoff (10 s, then 20 s capped at 15 s) with jitter
-- down to half, retry_after overrides, dead at idem.outbox_max_attempts.
SET idem.outbox_backoff_base = '10s';
SET idem.outbox_backoff_max = '15s';
SET idem.outbox_max_attempts = 4;
SELECT idem.outbox_put('mail', 'm', 'welcome', '{}', 'user', 'u1') AS em \gset
SELECT idem.outbox_put('mail', 'm', 'followup', '{}', 'user', 'u1') AS ef \gset
CREATE FUNCTION fail_next(wait interval DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  e record;
  result text;
BEGIN
  UPDATE idem.outbox_event SET available_at = now() WHERE status = 'pending' AND scope = 'mail';
  SELECT * INTO e FROM idem.outbox_lease(1, '1 minute') WHERE scope = 'mail';
  PERFORM idem.outbox_failed(e.id, e.lease_fence, 'smtp 451', wait);
  SELECT format('%s attempt %s: %s, delay %s', o.event_type, o.attempt_count, o.status,
                CASE WHEN o.status = 'dead' THEN 'none'
                     WHEN o.available_at - now() BETWEEN wait - interval '1 ms' AND wait THEN 'retry_after'
                     ELSE (SELECT format('in [%s, %s]', lo, hi) FROM (VALUES (
                       (CASE o.attempt_count WHEN 1 THEN 5 ELSE 7.5 END),
                       (CASE o.attempt_count WHEN 1 THEN 10 ELSE 15 END))) b(lo, hi)
                            WHERE extract(epoch FROM o.available_at - now()) BETWEEN lo AND hi) END)
    INTO STRICT result FROM idem.outbox_event o WHERE o.id = e.id;
  RETURN result;
END $$;
SELECT fail_next();
SELECT fail_next();
SELECT fail_next('42 seconds');
SELECT fail_next();
-- Dead: it stays for an operator, and no longer holds the aggregate back.
SELECT status, last_error FROM idem.outbox_event WHERE id = :em;
SELECT event_type FROM idem.outbox_lease(10, '1 minute') WHERE scope = 'mail';
SELECT idem.outbox_failed(:ef, 1, '');
SELECT idem.outbox_failed(:ef, 1, 'x', '-1 second');
RESET idem.outbox_backoff_base;
RESET idem.outbox_backoff_max;
RESET idem.outbox_max_attempts;

-- available_at in the future: not due yet.
SELECT idem.outbox_put('later', 'k', 'reminder', '{}', NULL, NULL, '{"h": 1}', now() + interval '1 hour') AS el \gset
SELECT count(*) AS not_due FROM idem.outbox_lease(10, '1 minute') WHERE id = :el;

-- The operator's summary, readable by pg_monitor.
SELECT pending, leased, lease_expired, published, dead, oldest_pending_age > interval '0' AS has_age
  FROM idem.outbox_summary;
SELECT has_table_privilege('pg_monitor', 'idem.outbox_summary', 'SELECT') AS monitor_reads,
       has_table_privilege('public', 'idem.outbox_event', 'SELECT') AS public_reads_events;

-- Purge of published events past idem.outbox_retention; dead ones stay.
SELECT idem.purge_published() AS too_young;
UPDATE idem.outbox_event SET published_at = published_at - interval '8 days' WHERE status = 'published';
SELECT idem.purge_published(1) AS first_batch, idem.purge_published() AS rest;
SELECT status, count(*) FROM idem.outbox_event GROUP BY status ORDER BY status;

-- Bad input.
SELECT idem.outbox_put(NULL, 'k', 't', '{}');
SELECT idem.outbox_put('s', '', 't', '{}');
SELECT idem.outbox_put('s', repeat('k', 256), 't', '{}');
SELECT idem.outbox_put('s', 'k', '', '{}');
SELECT idem.outbox_put('s', 'k', 't', NULL);
SELECT * FROM idem.outbox_lease(0);
SELECT * FROM idem.outbox_lease(10, '0');
SELECT idem.purge_published(-1);

DROP FUNCTION fail_next(interval);
TRUNCATE idem.outbox_event;
