-- The operator's surface: views, functions, signatures and privileges.
BEGIN;
SELECT plan(30);

SELECT has_view('idem', 'stats', 'idem.stats exists');
SELECT has_view('idem', 'key_health', 'idem.key_health exists');
SELECT has_view('idem', 'key_summary', 'idem.key_summary exists');
SELECT columns_are('idem', 'stats', ARRAY['datid', 'datname', 'new_claim', 'replay_success',
  'processing_active', 'processing_stale', 'retryable_failure', 'final_failure', 'request_mismatches',
  'stale_fences', 'marked_succeeded', 'marked_failed_retryable', 'marked_failed_final',
  'recovery_points_set', 'rows_swept', 'rows_purged', 'worker_rounds', 'waits_started',
  'waits_answered', 'waits_timed_out', 'mean_wait_ms', 'polling_fallbacks', 'session_bound_takeovers',
  'completer_runs', 'completer_successes', 'completer_failures', 'wait_attempts', 'wakeups_sent',
  'messages_purged', 'events_purged', 'failed_rounds', 'last_worker_round', 'stats_reset'],
  'stats has the documented columns');
SELECT has_view('idem', 'worker_status', 'idem.worker_status exists');
SELECT columns_are('idem', 'worker_status', ARRAY['database', 'pid', 'state', 'last_round_start',
  'last_round_end', 'last_round_swept', 'last_round_purged', 'total_rounds', 'failed_rounds',
  'failing_since', 'last_error', 'last_error_sqlstate', 'last_error_scope'],
  'worker_status has the documented columns');
SELECT columns_are('idem', 'key_health', ARRAY['scope', 'processing', 'stuck', 'oldest_processing_age',
  'expired_unpurged', 'oldest_expired_age', 'awaiting_completer'], 'key_health has the documented columns');
SELECT columns_are('idem', 'key_summary', ARRAY['scope', 'total', 'processing', 'succeeded',
  'failed_retryable', 'failed_final', 'stuck', 'oldest_processing_age', 'expired_unpurged',
  'oldest_expired_age'], 'key_summary has the documented columns');

SELECT has_function('idem', 'stats_counters', ARRAY[]::text[]);
SELECT has_function('idem', 'stats_reset', ARRAY['boolean']);
SELECT function_returns('idem', 'stats_reset', ARRAY['boolean'], 'void');
SELECT is(pg_get_function_arguments('idem.stats_reset'::regproc), 'all_databases boolean DEFAULT false',
  'stats_reset resets this database unless asked for all');
SELECT has_function('idem', 'lookup', ARRAY['text', 'text']);
SELECT function_returns('idem', 'lookup', ARRAY['text', 'text'], 'setof idem.idempotency_request');
SELECT has_function('idem', 'evict', ARRAY['text', 'text', 'boolean']);
SELECT function_returns('idem', 'evict', ARRAY['text', 'text', 'boolean'], 'idem.idempotency_request');
SELECT is(pg_get_function_arguments('idem.evict'::regproc), 'scope text, key text, force boolean DEFAULT false',
  'evict arguments and defaults');
SELECT has_function('idem', 'force_expire', ARRAY['text', 'text', 'boolean']);
SELECT is(pg_get_function_arguments('idem.force_expire'::regproc), 'scope text, key text, force boolean DEFAULT false',
  'force_expire arguments and defaults');
SELECT is_definer('idem', 'lookup', ARRAY['text', 'text']);
SELECT is_definer('idem', 'evict', ARRAY['text', 'text', 'boolean']);
SELECT is_definer('idem', 'force_expire', ARRAY['text', 'text', 'boolean']);

-- Nothing for PUBLIC; pg_monitor reads.
SELECT table_privs_are('idem', 'stats', 'public', ARRAY[]::text[], 'PUBLIC cannot read idem.stats');
SELECT table_privs_are('idem', 'key_summary', 'public', ARRAY[]::text[], 'PUBLIC cannot read idem.key_summary');
SELECT table_privs_are('idem', 'stats', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads idem.stats');
SELECT table_privs_are('idem', 'key_health', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads idem.key_health');
SELECT function_privs_are('idem', 'stats_reset', ARRAY['boolean'], 'public', ARRAY[]::text[], 'PUBLIC cannot reset');
SELECT function_privs_are('idem', 'lookup', ARRAY['text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot look keys up');
SELECT function_privs_are('idem', 'evict', ARRAY['text', 'text', 'boolean'], 'public', ARRAY[]::text[], 'PUBLIC cannot evict');
SELECT function_privs_are('idem', 'force_expire', ARRAY['text', 'text', 'boolean'], 'public', ARRAY[]::text[], 'PUBLIC cannot expire');

SELECT * FROM finish();
ROLLBACK;
