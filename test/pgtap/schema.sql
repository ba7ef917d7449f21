-- The installed objects, their types and signatures, and their privileges.
BEGIN;
SELECT plan(139);

SELECT has_schema('idem');
-- Two ways in: CREATE EXTENSION (the C++ engine, or the portable one through
-- pg_tle) makes an extension; the portable engine's SQL file
-- (dist/idem-portable.sql) makes none and records its version in
-- idem.installed_version instead. The three assertions about the extension
-- row ask the SQL-file install what stands for it.
SELECT CASE WHEN EXISTS (SELECT FROM pg_extension WHERE extname = 'idem') THEN has_extension('idem')
  ELSE has_table('idem', 'installed_version', 'no extension: the SQL-file install records its version in idem.installed_version') END;
SELECT CASE WHEN EXISTS (SELECT FROM pg_extension WHERE extname = 'idem')
  THEN is((SELECT extrelocatable FROM pg_extension WHERE extname = 'idem'), false, 'idem is not relocatable')
  ELSE skip('installed from the SQL file: no extension to relocate (the file names schema idem throughout)', 1) END;

-- Types
SELECT has_enum('idem', 'idempotency_status', 'idempotency_status exists');
SELECT enum_has_labels('idem', 'idempotency_status',
  ARRAY['processing', 'succeeded', 'failed_retryable', 'failed_final']);
SELECT has_enum('idem', 'claim_kind', 'claim_kind exists');
SELECT enum_has_labels('idem', 'claim_kind',
  ARRAY['new_claim', 'replay_success', 'processing_active', 'processing_stale',
        'retryable_failure', 'final_failure']);
SELECT has_composite('idem', 'claim', 'idem.claim is a composite type');
SELECT is(
  (SELECT array_agg(attname::text || ' ' || format_type(atttypid, atttypmod) ORDER BY attnum)
     FROM pg_attribute WHERE attrelid = 'idem.claim'::regclass AND attnum > 0),
  ARRAY['kind idem.claim_kind', 'fence bigint', 'attempt_count integer', 'recovery_point text',
        'response_code integer', 'response_body jsonb', 'result_ref_type text', 'result_ref_id text',
        'failure_code text', 'failure_message text', 'locked_until timestamp with time zone',
        'expires_at timestamp with time zone'],
  'idem.claim has the contract''s columns in order');

-- The table
SELECT has_table('idem', 'idempotency_request', 'the key-store table exists');
SELECT col_is_pk('idem', 'idempotency_request', ARRAY['scope', 'key'], 'primary key is (scope, key)');
SELECT col_type_is('idem', 'idempotency_request', 'scope', 'text', 'scope is text');
SELECT col_type_is('idem', 'idempotency_request', 'key', 'text', 'key is text');
SELECT col_type_is('idem', 'idempotency_request', 'request_hash', 'text', 'request_hash is text');
SELECT col_type_is('idem', 'idempotency_request', 'status', 'idem.idempotency_status', 'status is the enum');
SELECT col_type_is('idem', 'idempotency_request', 'recovery_point', 'text', 'recovery_point is text');
SELECT col_default_is('idem', 'idempotency_request', 'recovery_point', 'started', 'recovery_point starts at started');
SELECT col_type_is('idem', 'idempotency_request', 'fence', 'bigint', 'fence is bigint');
SELECT col_type_is('idem', 'idempotency_request', 'attempt_count', 'integer', 'attempt_count is integer');
SELECT col_type_is('idem', 'idempotency_request', 'response_body', 'jsonb', 'response_body is jsonb');
SELECT col_type_is('idem', 'idempotency_request', 'locked_until', 'timestamp with time zone', 'locked_until is timestamptz');
SELECT col_type_is('idem', 'idempotency_request', 'expires_at', 'timestamp with time zone', 'expires_at is timestamptz');
SELECT columns_are('idem', 'idempotency_request', ARRAY[
  'scope', 'key', 'request_hash', 'status', 'recovery_point', 'fence', 'attempt_count',
  'claimed_by', 'claimed_at', 'locked_until', 'response_code', 'response_body', 'result_ref_type',
  'result_ref_id', 'failure_code', 'failure_message', 'created_at', 'updated_at', 'finished_at',
  'expires_at', 'bound_session'], 'the table has exactly the documented columns');
SELECT col_type_is('idem', 'idempotency_request', 'bound_session', 'bigint', 'bound_session (1.1) is bigint');
SELECT col_not_null('idem', 'idempotency_request', c, c || ' is NOT NULL')
  FROM unnest(ARRAY['scope', 'key', 'request_hash', 'status', 'recovery_point', 'fence',
                    'attempt_count', 'expires_at']) AS c;
SELECT has_check('idem', 'idempotency_request', 'the table has CHECK constraints');
-- 1.1: one CHECK calling one C function that enforces 1.0's thirteen rules.
SELECT is((SELECT array_agg(conname::text) FROM pg_constraint
            WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c'),
          ARRAY['idempotency_request_invariants'], 'one CHECK constraint holds the invariants');
SELECT is((SELECT pg_get_constraintdef(oid) FROM pg_constraint
            WHERE conrelid = 'idem.idempotency_request'::regclass
              AND conname = 'idempotency_request_invariants'),
  'CHECK (idem.request_invariants_hold(idempotency_request.*))',
  'the invariants constraint passes the whole row (one node to read back at each write)');
SELECT function_returns('idem', 'request_invariants_hold', ARRAY['text', 'text', 'text',
  'idem.idempotency_status', 'text', 'bigint', 'integer', 'timestamp with time zone', 'integer',
  'jsonb', 'text', 'text', 'timestamp with time zone', 'timestamp with time zone',
  'timestamp with time zone'], 'boolean');
SELECT function_returns('idem', 'request_invariants_hold', ARRAY['idem.idempotency_request'], 'boolean');
SELECT is((SELECT array_agg(row(provolatile, proparallel, proisstrict, prosecdef)::text)
             FROM pg_proc WHERE proname = 'request_invariants_hold'
              AND pronamespace = 'idem'::regnamespace),
          ARRAY['(i,s,f,f)', '(i,s,f,f)'],
          'both request_invariants_hold are immutable, parallel safe, not strict, not definers');
SELECT ok(bool_and(has_function_privilege('public', p.oid, 'EXECUTE')),
          'PUBLIC may execute request_invariants_hold (a CHECK runs it as the writing role)')
  FROM pg_proc p WHERE p.proname = 'request_invariants_hold' AND p.pronamespace = 'idem'::regnamespace;
SELECT has_index('idem', 'idempotency_request', 'idempotency_request_sweep_idx', ARRAY['locked_until'], 'sweeper index');
SELECT has_index('idem', 'idempotency_request', 'idempotency_request_purge_idx', ARRAY['expires_at'], 'purger index');
SELECT is(pg_get_expr(indpred, indrelid), '(status = ''processing''::idem.idempotency_status)', 'sweeper index covers processing rows only')
  FROM pg_index WHERE indexrelid = 'idem.idempotency_request_sweep_idx'::regclass;
SELECT is(pg_get_expr(indpred, indrelid), '(status <> ''processing''::idem.idempotency_status)', 'purger index covers finished rows only')
  FROM pg_index WHERE indexrelid = 'idem.idempotency_request_purge_idx'::regclass;
SELECT has_sequence('idem', 'fence_seq', 'fences come from a sequence');
-- An extension's table is dumped when it is in extconfig; a table that
-- belongs to no extension (the SQL-file install) is dumped like any other.
SELECT ok(CASE WHEN EXISTS (SELECT FROM pg_extension WHERE extname = 'idem')
            THEN (SELECT extconfig @> ARRAY['idem.idempotency_request'::regclass::oid]
                    FROM pg_extension WHERE extname = 'idem')
            ELSE NOT EXISTS (SELECT FROM pg_depend WHERE classid = 'pg_class'::regclass
                               AND objid = 'idem.idempotency_request'::regclass AND deptype = 'e') END,
          'pg_dump dumps the keys');

-- Functions and signatures
SELECT has_function('idem', 'claim_idempotency_key', ARRAY['text', 'text', 'text', 'text', 'interval', 'interval']);
SELECT function_returns('idem', 'claim_idempotency_key', ARRAY['text', 'text', 'text', 'text', 'interval', 'interval'], 'idem.claim');
SELECT is(pg_get_function_arguments('idem.claim_idempotency_key'::regproc),
  'scope text, key text, request_hash text, claimed_by text DEFAULT NULL::text, lock_timeout interval DEFAULT NULL::interval, retention interval DEFAULT NULL::interval',
  'claim_idempotency_key arguments and defaults');
SELECT has_function('idem', 'mark_succeeded', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'text', 'text']);
SELECT is(pg_get_function_arguments('idem.mark_succeeded'::regproc),
  'scope text, key text, fence bigint, response_code integer, response_body jsonb DEFAULT NULL::jsonb, result_ref_type text DEFAULT NULL::text, result_ref_id text DEFAULT NULL::text',
  'mark_succeeded arguments and defaults');
SELECT has_function('idem', 'mark_failed', ARRAY['text', 'text', 'bigint', 'boolean', 'text', 'text', 'integer', 'jsonb']);
SELECT is(pg_get_function_arguments('idem.mark_failed'::regproc),
  'scope text, key text, fence bigint, retryable boolean, failure_code text, failure_message text DEFAULT NULL::text, response_code integer DEFAULT NULL::integer, response_body jsonb DEFAULT NULL::jsonb',
  'mark_failed arguments and defaults');
SELECT function_returns('idem', 'mark_failed', ARRAY['text', 'text', 'bigint', 'boolean', 'text', 'text', 'integer', 'jsonb'], 'void');
SELECT has_function('idem', 'set_recovery_point', ARRAY['text', 'text', 'bigint', 'text']);
SELECT has_function('idem', 'purge_expired', ARRAY['integer']);
SELECT function_returns('idem', 'purge_expired', ARRAY['integer'], 'bigint');
SELECT has_function('idem', 'sweep_stale', ARRAY['integer']);
SELECT function_returns('idem', 'sweep_stale', ARRAY['integer'], 'bigint');
-- 1.2: the worker's round in one call, an operator's definer.
SELECT has_function('idem', 'run_maintenance', ARRAY[]::text[]);
SELECT function_returns('idem', 'run_maintenance', ARRAY[]::text[], 'jsonb');
SELECT is_definer('idem', 'run_maintenance', ARRAY[]::text[]);
SELECT ok(NOT has_function_privilege('public', 'idem.run_maintenance()', 'EXECUTE'),
          'run_maintenance is not granted to PUBLIC');
-- 1.3: Citus. An operator's calls that run with their caller's rights, and
-- maintenance's list of the relations a node holds.
SELECT function_returns('idem', 'citus_distribute', ARRAY['boolean'], 'jsonb');
SELECT isnt_definer('idem', 'citus_distribute', ARRAY['boolean']);
SELECT function_privs_are('idem', 'citus_distribute', ARRAY['boolean'], 'public', ARRAY[]::text[], 'PUBLIC cannot distribute');
SELECT function_returns('idem', 'citus_node_setup', ARRAY[]::text[], 'jsonb');
SELECT isnt_definer('idem', 'citus_node_setup', ARRAY[]::text[]);
SELECT function_privs_are('idem', 'citus_node_setup', ARRAY[]::text[], 'public', ARRAY[]::text[], 'PUBLIC cannot set up a node');
SELECT function_returns('idem', 'local_relations', ARRAY['regclass'], 'setof regclass');
SELECT isnt_definer('idem', 'local_relations', ARRAY['regclass']);
SELECT function_privs_are('idem', 'local_relations', ARRAY['regclass'], 'public', ARRAY[]::text[], 'PUBLIC cannot list local relations');
SELECT is((SELECT array_agg(p.proconfig[1] ORDER BY p.proname) FROM pg_proc p
            WHERE p.oid IN ('idem.citus_distribute(boolean)'::regprocedure, 'idem.citus_node_setup()'::regprocedure,
                            'idem.local_relations(regclass)'::regprocedure)),
  ARRAY['search_path=pg_catalog, pg_temp', 'search_path=pg_catalog, pg_temp', 'search_path=pg_catalog, pg_temp'],
  'the Citus functions run under search_path = pg_catalog, pg_temp');
-- 1.2: the calls adapters need, request-path definers.
SELECT function_returns('idem', 'release', ARRAY['text', 'text', 'bigint'], 'void');
SELECT is(pg_get_function_arguments('idem.release'::regproc),
  'scope text, key text, fence bigint', 'release arguments');
SELECT is_definer('idem', 'release', ARRAY['text', 'text', 'bigint']);
SELECT function_privs_are('idem', 'release', ARRAY['text', 'text', 'bigint'], 'public', ARRAY[]::text[], 'PUBLIC cannot release');
SELECT function_returns('idem', 'peek', ARRAY['text', 'text'], 'idem.claim');
SELECT is(pg_get_function_arguments('idem.peek'::regproc),
  'scope text, key text', 'peek arguments');
SELECT is_definer('idem', 'peek', ARRAY['text', 'text']);
SELECT function_privs_are('idem', 'peek', ARRAY['text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot peek');
SELECT has_function('idem', 'request_hash', ARRAY['jsonb']);
SELECT has_function('idem', 'request_hash', ARRAY['bytea']);
SELECT volatility_is('idem', 'request_hash', ARRAY['jsonb'], 'immutable');
SELECT is_strict('idem', 'request_hash', ARRAY['jsonb']);
SELECT volatility_is('idem', 'claim_idempotency_key', ARRAY['text', 'text', 'text', 'text', 'interval', 'interval'], 'volatile');
SELECT is_definer('idem', 'claim_idempotency_key', ARRAY['text', 'text', 'text', 'text', 'interval', 'interval']);

-- 1.1: waiting for a twin, and an owner's longer lease.
SELECT has_function('idem', 'claim_or_wait', ARRAY['text', 'text', 'text', 'interval', 'text', 'interval', 'interval']);
SELECT function_returns('idem', 'claim_or_wait', ARRAY['text', 'text', 'text', 'interval', 'text', 'interval', 'interval'], 'idem.claim');
SELECT is(pg_get_function_arguments('idem.claim_or_wait'::regproc),
  'scope text, key text, request_hash text, max_wait interval, claimed_by text DEFAULT NULL::text, lock_timeout interval DEFAULT NULL::interval, retention interval DEFAULT NULL::interval',
  'claim_or_wait arguments and defaults');
SELECT is_definer('idem', 'claim_or_wait', ARRAY['text', 'text', 'text', 'interval', 'text', 'interval', 'interval']);
SELECT has_function('idem', 'extend_lock', ARRAY['text', 'text', 'bigint', 'interval']);
SELECT function_returns('idem', 'extend_lock', ARRAY['text', 'text', 'bigint', 'interval'], 'timestamp with time zone');
SELECT is(pg_get_function_arguments('idem.extend_lock'::regproc),
  'scope text, key text, fence bigint, extend_by interval', 'extend_lock arguments');
SELECT is_definer('idem', 'extend_lock', ARRAY['text', 'text', 'bigint', 'interval']);

-- Privileges: nothing for PUBLIC but the schema and the fingerprints.
SELECT table_privs_are('idem', 'idempotency_request', 'public', ARRAY[]::text[], 'PUBLIC has no table privileges');
SELECT sequence_privs_are('idem', 'fence_seq', 'public', ARRAY[]::text[], 'PUBLIC has no sequence privileges');
SELECT function_privs_are('idem', 'claim_idempotency_key', ARRAY['text', 'text', 'text', 'text', 'interval', 'interval'], 'public', ARRAY[]::text[], 'PUBLIC cannot claim');
SELECT function_privs_are('idem', 'mark_succeeded', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot mark');
SELECT function_privs_are('idem', 'purge_expired', ARRAY['integer'], 'public', ARRAY[]::text[], 'PUBLIC cannot purge');
SELECT function_privs_are('idem', 'claim_or_wait', ARRAY['text', 'text', 'text', 'interval', 'text', 'interval', 'interval'], 'public', ARRAY[]::text[], 'PUBLIC cannot wait for a claim');
SELECT function_privs_are('idem', 'extend_lock', ARRAY['text', 'text', 'bigint', 'interval'], 'public', ARRAY[]::text[], 'PUBLIC cannot extend a lock');
SELECT function_privs_are('idem', 'request_hash', ARRAY['jsonb'], 'public', ARRAY['EXECUTE'], 'PUBLIC may hash');
SELECT schema_privs_are('idem', 'public', ARRAY['USAGE'], 'PUBLIC may use the schema');

-- 1.1, clients: Retry-After and the stored answer at completion.
SELECT function_returns('idem', 'retry_after', ARRAY['text', 'idem.claim'], 'integer');
SELECT function_returns('idem', 'typical_duration', ARRAY['text'], 'interval');
SELECT function_returns('idem', 'mark_succeeded_returning', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'text', 'text'], 'idem.claim');
SELECT function_returns('idem', 'mark_failed_returning', ARRAY['text', 'text', 'bigint', 'boolean', 'text', 'text', 'integer', 'jsonb'], 'idem.claim');
SELECT is_definer('idem', 'mark_succeeded_returning', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'text', 'text']);
SELECT is_definer('idem', 'mark_failed_returning', ARRAY['text', 'text', 'bigint', 'boolean', 'text', 'text', 'integer', 'jsonb']);
SELECT function_privs_are('idem', 'retry_after', ARRAY['text', 'idem.claim'], 'public', ARRAY[]::text[], 'PUBLIC cannot ask retry_after');
SELECT function_privs_are('idem', 'typical_duration', ARRAY['text'], 'public', ARRAY[]::text[], 'PUBLIC cannot read durations');
SELECT function_privs_are('idem', 'mark_succeeded_returning', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot mark (returning)');
SELECT function_privs_are('idem', 'stored_answer', ARRAY['text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot read stored answers');
-- ==== inbox: consume-once and the outbox (docs/contract.md "Version 1.1") ====
SELECT has_table('idem', 'consumed_message', 'the inbox table');
SELECT has_table('idem', 'outbox_event', 'the outbox table');
SELECT col_is_pk('idem', 'outbox_event', ARRAY['id', 'key'], 'the outbox''s primary key is (id, key): it carries the key Citus distributes by');
SELECT has_function('idem', 'consume_once', ARRAY['text', 'text', 'text', 'interval']);
SELECT function_returns('idem', 'consume_once', ARRAY['text', 'text', 'text', 'interval'], 'boolean');
SELECT is(pg_get_function_arguments('idem.consume_once'::regproc),
  'consumer text, message_id text, message_hash text, retention interval DEFAULT NULL::interval',
  'consume_once arguments and defaults');
SELECT function_returns('idem', 'set_consumed_result', ARRAY['text', 'text', 'text', 'text'], 'void');
SELECT function_returns('idem', 'outbox_put', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'timestamp with time zone'], 'bigint');
SELECT is(pg_get_function_arguments('idem.outbox_put'::regproc),
  'scope text, key text, event_type text, payload jsonb, aggregate_type text DEFAULT NULL::text, aggregate_id text DEFAULT NULL::text, headers jsonb DEFAULT NULL::jsonb, available_at timestamp with time zone DEFAULT NULL::timestamp with time zone',
  'outbox_put arguments and defaults');
SELECT is(pg_get_function_arguments('idem.outbox_lease'::regproc),
  'batch_limit integer DEFAULT 100, lease interval DEFAULT ''00:00:30''::interval, event_types text[] DEFAULT NULL::text[]',
  'outbox_lease arguments and defaults');
SELECT is(pg_get_function_result('idem.outbox_lease'::regproc),
  'TABLE(id bigint, lease_fence bigint, scope text, key text, event_type text, aggregate_type text, aggregate_id text, payload jsonb, headers jsonb, attempt_count integer, delivery_key text)',
  'outbox_lease result columns');
SELECT function_returns('idem', 'outbox_published', ARRAY['bigint', 'bigint'], 'void');
SELECT is(pg_get_function_arguments('idem.outbox_failed'::regproc),
  'id bigint, lease_fence bigint, error text, retry_after interval DEFAULT NULL::interval',
  'outbox_failed arguments and defaults');
SELECT is_definer('idem', 'consume_once', ARRAY['text', 'text', 'text', 'interval']);
SELECT is_definer('idem', 'outbox_lease', ARRAY['integer', 'interval', 'text[]']);
SELECT table_privs_are('idem', 'consumed_message', 'public', ARRAY[]::text[], 'PUBLIC cannot read the inbox');
SELECT table_privs_are('idem', 'outbox_event', 'public', ARRAY[]::text[], 'PUBLIC cannot read the outbox');
SELECT table_privs_are('idem', 'outbox_summary', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads the outbox summary');
SELECT function_privs_are('idem', 'consume_once', ARRAY['text', 'text', 'text', 'interval'], 'public', ARRAY[]::text[], 'PUBLIC cannot consume');
SELECT function_privs_are('idem', 'outbox_put', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'text', 'jsonb', 'timestamp with time zone'], 'public', ARRAY[]::text[], 'PUBLIC cannot put');
SELECT function_privs_are('idem', 'outbox_lease', ARRAY['integer', 'interval', 'text[]'], 'public', ARRAY[]::text[], 'PUBLIC cannot lease');
-- ==== end inbox ====
-- idem.scope_policy (docs/policy.md): not PUBLIC, readable by pg_monitor.
SELECT has_table('idem', 'scope_policy', 'the per-scope policy table exists');
SELECT columns_are('idem', 'scope_policy', ARRAY['scope', 'lock_timeout', 'retention', 'keep_forever',
    'max_attempts', 'bind_lock_to_session', 'completer', 'completer_delay'], 'scope_policy has the columns of the contract');
SELECT col_type_is('idem', 'scope_policy', 'completer', 'text', 'a completer is named by text (pg_upgrade carries no function OID)');
SELECT table_privs_are('idem', 'scope_policy', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on scope_policy');
SELECT table_privs_are('idem', 'scope_policy', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads scope_policy');

SELECT * FROM finish();
ROLLBACK;
