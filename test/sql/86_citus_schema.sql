-- 1.3's schema for Citus, on a server without it (docs/beyond-one-server.md,
-- "Citus"): nothing a call answers changes, the functions that distribute
-- and set up nodes refuse clearly, and maintenance's list of relations is
-- the table itself. test/citus/ runs the same functions on a cluster.
\set VERBOSITY terse

-- ==== the functions: caller's rights, a pinned path, no PUBLIC ====
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer, p.provolatile,
       p.proconfig, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p
 WHERE p.oid IN ('idem.citus_distribute(boolean)'::regprocedure, 'idem.citus_node_setup()'::regprocedure,
                 'idem.local_relations(regclass)'::regprocedure)
 ORDER BY p.proname;

-- ==== without Citus: 0A000, before anything else ====
SELECT error_of('SELECT idem.citus_distribute()') AS citus_distribute;
SELECT error_of('SELECT idem.citus_node_setup()') AS citus_node_setup;
-- Nothing was distributed, set up or changed by the refusals.
SELECT seqrelid::regclass AS sequence, seqincrement
  FROM pg_sequence
 WHERE seqrelid IN ('idem.fence_seq'::regclass, 'idem.outbox_lease_fence_seq'::regclass)
 ORDER BY seqrelid::regclass::text;

-- ==== the guard against a NULL key's delegation: only after Citus's library ====
SELECT current_setting('idem.citus_null_key_guard', true) IS DISTINCT FROM 'on' AS no_null_key_guard;

-- ==== local_relations: the table itself, for every table ====
SELECT t AS relation, array_agg(r ORDER BY r::text) AS local_relations
  FROM unnest(ARRAY['idem.idempotency_request', 'idem.consumed_message', 'idem.outbox_event',
                    'idem.scope_policy', 'idem.scope_owner']::regclass[]) t,
       idem.local_relations(t) r
 GROUP BY t ORDER BY t::text;
SELECT count(*) AS for_null FROM idem.local_relations(NULL);

-- ==== the CHECK constraints: whole-row on one server, the same messages ====
SELECT conrelid::regclass AS "table", conname, pg_get_constraintdef(oid) AS definition
  FROM pg_constraint
 WHERE contype = 'c'
   AND conrelid IN ('idem.idempotency_request'::regclass, 'idem.consumed_message'::regclass,
                    'idem.outbox_event'::regclass)
 ORDER BY conrelid::regclass::text, conname;
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, locked_until, created_at, updated_at, expires_at)
VALUES ('c86', 'k', 'h', 'processing', 'finished', 1, now(), now() + interval '1 hour',
        now(), now(), now() + interval '1 day');
INSERT INTO idem.consumed_message (consumer, message_id, message_hash, consumed_at, expires_at)
VALUES ('c86', 'm', '', now(), now() + interval '1 day');
INSERT INTO idem.outbox_event (scope, key, event_type, payload, delivery_key, available_at,
    created_at, status)
VALUES ('c86', 'k', 'e', '{}', 'd', now(), now(), 'leased');

-- ==== the outbox: primary key (id, key), found by id through it ====
SELECT conname, pg_get_constraintdef(oid) AS definition
  FROM pg_constraint
 WHERE conrelid = 'idem.outbox_event'::regclass AND contype IN ('p', 'u')
 ORDER BY 1;
-- Every statement that finds an event by id alone can use the primary
-- key's index: id leads it.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT e.status FROM idem.outbox_event e WHERE e.id = 42;
EXPLAIN (COSTS OFF) UPDATE idem.outbox_event e SET last_error = 'x'
 WHERE e.id = 42 AND e.status = 'leased' AND e.lease_fence = 7;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- The outbox works as before: put, lease, publish, each id once.
SELECT count(*) AS put FROM (
  SELECT idem.outbox_put('c86', 'k' || g, 'c86.happened', jsonb_build_object('n', g))
    FROM generate_series(1, 3) g) s;
SELECT count(DISTINCT id) AS distinct_ids, count(*) AS events
  FROM idem.outbox_event WHERE scope = 'c86';
SELECT count(idem.outbox_published(l.id, l.lease_fence)) AS published
  FROM idem.outbox_lease(10, '1 minute', ARRAY['c86.happened']) l;
SELECT status, count(*) FROM idem.outbox_event WHERE scope = 'c86' GROUP BY status;

-- ==== fences: one step at a time on one server, as before ====
SELECT fence AS f1 FROM idem.claim_idempotency_key('c86', 'f1', 'h') \gset
SELECT fence - :f1 AS step FROM idem.claim_idempotency_key('c86', 'f2', 'h');

-- Clean up.
DELETE FROM idem.idempotency_request WHERE scope = 'c86';
DELETE FROM idem.outbox_event WHERE scope = 'c86';
