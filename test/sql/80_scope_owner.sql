-- Scopes owned by roles (docs/contract.md "Version 1.2: scopes owned by roles"): a
-- scope is covered by the longest scope_prefix of idem.scope_owner it starts
-- with, and every call that reads or writes a covered scope's keys, a covered
-- consumer's messages or a covered scope's outbox events refuses, with 42501,
-- a calling role that is not a member of the owner, before it reads any key.
TRUNCATE idem.idempotency_request;
TRUNCATE idem.scope_policy;
TRUNCATE idem.consumed_message;
DELETE FROM idem.outbox_event;
SET idem.lock_timeout = '5min';

-- The table: written by the extension's owner only, read by monitoring.
SELECT r AS role, p AS privilege, has_table_privilege(r, 'idem.scope_owner', p) AS granted
  FROM unnest(ARRAY['public', 'pg_monitor']) r,
       unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
 ORDER BY 1, 2;
-- The check and the boolean: definers with a pinned search_path, for PUBLIC
-- (the policy table's trigger runs as the role that writes it).
SELECT p.oid::regprocedure AS function, p.prosecdef,
       (p.proconfig IS NOT DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp'] OR p.proconfig IS NULL AND p.probin = '$libdir/idem') AS pinned_or_proven,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p
 WHERE p.oid IN ('idem.check_scope_owner(text)'::regprocedure, 'idem.may_use_scope(text)'::regprocedure)
 ORDER BY p.proname;

-- Roles: callers get idem's functions through idem_so_caller; the tenants
-- own scopes; alice and bob are members of one tenant each, by a grant;
-- dave is a member of tenant a through a team role (two grants deep).
CREATE ROLE idem_so_caller NOLOGIN;
GRANT USAGE ON SCHEMA idem TO idem_so_caller;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA idem TO idem_so_caller;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON idem.scope_policy TO idem_so_caller;
CREATE ROLE idem_so_tenant_a NOLOGIN IN ROLE idem_so_caller;
CREATE ROLE idem_so_tenant_b NOLOGIN IN ROLE idem_so_caller;
CREATE ROLE idem_so_alice NOLOGIN IN ROLE idem_so_caller, idem_so_tenant_a;
CREATE ROLE idem_so_bob NOLOGIN IN ROLE idem_so_caller, idem_so_tenant_b;
CREATE ROLE idem_so_team NOLOGIN IN ROLE idem_so_tenant_a;
CREATE ROLE idem_so_dave NOLOGIN IN ROLE idem_so_caller, idem_so_team;

-- No row: every scope is open, as in 1.1.
SET ROLE idem_so_bob;
SELECT kind FROM idem.claim_idempotency_key('a.orders', 'before', 'h');
RESET ROLE;
TRUNCATE idem.idempotency_request;

INSERT INTO idem.scope_owner VALUES ('a.', 'idem_so_tenant_a'), ('b.', 'idem_so_tenant_b');
SELECT scope_prefix, owner FROM idem.scope_owner ORDER BY 1;

-- ---- every covered call: a member may, a non-member gets 42501 ----
-- alice claims keys of tenant a (her membership is a grant).
SET ROLE idem_so_alice;
SELECT kind, fence AS f_succ FROM idem.claim_idempotency_key('a.orders', 'succ', 'h') \gset
SELECT :'kind' AS alice_claims;
SELECT kind, fence AS f_fail FROM idem.claim_idempotency_key('a.orders', 'fail', 'h') \gset
SELECT fence AS f_succ_ret FROM idem.claim_or_wait('a.orders', 'succ_ret', 'h', '1 second') \gset
SELECT fence AS f_fail_ret FROM idem.claim_idempotency_key('a.orders', 'fail_ret', 'h') \gset
SELECT fence AS f_point FROM idem.claim_idempotency_key('a.orders', 'point', 'h') \gset
SELECT fence AS f_release FROM idem.claim_idempotency_key('a.orders', 'release', 'h') \gset
RESET ROLE;

-- bob, a member of tenant b only: refused by every call, with the fences
-- alice holds, before anything about the key is read.
SET ROLE idem_so_bob;
SELECT error_of($$SELECT idem.claim_idempotency_key('a.orders', 'succ', 'h')$$) AS claim;
SELECT state_of($$SELECT idem.claim_or_wait('a.orders', 'succ', 'h', '1 second')$$) AS claim_or_wait;
SELECT state_of(format($$SELECT idem.mark_succeeded('a.orders', 'succ', %s, 200)$$, :f_succ)) AS mark_succeeded;
SELECT state_of(format($$SELECT idem.mark_failed('a.orders', 'fail', %s, true, 'boom')$$, :f_fail)) AS mark_failed;
SELECT state_of(format($$SELECT idem.mark_succeeded_returning('a.orders', 'succ_ret', %s, 200)$$, :f_succ_ret)) AS mark_succeeded_returning;
SELECT state_of(format($$SELECT idem.mark_failed_returning('a.orders', 'fail_ret', %s, false, 'boom')$$, :f_fail_ret)) AS mark_failed_returning;
SELECT state_of(format($$SELECT idem.set_recovery_point('a.orders', 'point', %s, 'charged')$$, :f_point)) AS set_recovery_point;
SELECT state_of(format($$SELECT idem.extend_lock('a.orders', 'point', %s, '1 minute')$$, :f_point)) AS extend_lock;
SELECT state_of(format($$SELECT idem.release('a.orders', 'release', %s)$$, :f_release)) AS release;
SELECT state_of($$SELECT idem.peek('a.orders', 'succ')$$) AS peek;
SELECT state_of($$SELECT idem.stored_answer('a.orders', 'succ')$$) AS stored_answer;
SELECT state_of($$SELECT idem.retry_after('a.orders', ROW('processing_active', NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, now() + interval '1 minute', NULL)::idem.claim)$$) AS retry_after;
SELECT state_of($$SELECT idem.typical_duration('a.orders')$$) AS typical_duration;
SELECT state_of($$SELECT idem.consume_once('a.consumer', 'm1', 'h')$$) AS consume_once;
SELECT state_of($$SELECT idem.set_consumed_result('a.consumer', 'm1', 'order', '1')$$) AS set_consumed_result;
SELECT state_of($$SELECT idem.outbox_put('a.orders', 'succ', 'receipt', '{}')$$) AS outbox_put;
-- The same refusal whether the key exists or not, and whatever the fence.
SELECT error_of(format($$SELECT idem.mark_succeeded('a.orders', 'succ', %s, 200)$$, :f_succ))
     = error_of($$SELECT idem.mark_succeeded('a.orders', 'no such key', 1, 200)$$) AS same_refusal_for_a_missing_key,
       error_of($$SELECT idem.peek('a.orders', 'succ')$$)
     = error_of($$SELECT idem.peek('a.orders', 'no such key')$$) AS same_peek_refusal;
RESET ROLE;
-- Nothing bob tried changed a thing.
SELECT key, status, recovery_point FROM idem.idempotency_request ORDER BY key;
SELECT count(*) AS consumed FROM idem.consumed_message;

-- alice makes the same calls: each one works.
SET ROLE idem_so_alice;
SELECT idem.mark_succeeded('a.orders', 'succ', :f_succ, 200) AS mark_succeeded;
SELECT idem.mark_failed('a.orders', 'fail', :f_fail, true, 'boom') AS mark_failed;
SELECT kind, response_code FROM idem.mark_succeeded_returning('a.orders', 'succ_ret', :f_succ_ret, 201);
SELECT kind, failure_code FROM idem.mark_failed_returning('a.orders', 'fail_ret', :f_fail_ret, false, 'boom');
SELECT idem.set_recovery_point('a.orders', 'point', :f_point, 'charged') AS set_recovery_point;
SELECT idem.extend_lock('a.orders', 'point', :f_point, '1 minute') > now() AS extend_lock;
SELECT idem.release('a.orders', 'release', :f_release) AS release;
SELECT kind, fence FROM idem.peek('a.orders', 'succ');
SELECT kind, response_code FROM idem.stored_answer('a.orders', 'succ');
SELECT idem.retry_after('a.orders', ROW('processing_active', NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, now() + interval '1 minute', NULL)::idem.claim) > 0 AS retry_after;
SELECT idem.typical_duration('a.orders') IS NOT NULL AS typical_duration_known;
SELECT kind FROM idem.claim_or_wait('a.orders', 'succ', 'h', '1 second');
SELECT idem.consume_once('a.consumer', 'm1', 'h') AS consume_once;
SELECT idem.set_consumed_result('a.consumer', 'm1', 'order', '1') AS set_consumed_result;
SELECT idem.outbox_put('a.orders', 'succ', 'receipt', '{}') IS NOT NULL AS outbox_put;
RESET ROLE;
SELECT key, status, recovery_point FROM idem.idempotency_request ORDER BY key;

-- The owner itself, and a member two grants deep, may; bob's own tenant
-- is his.
SET ROLE idem_so_tenant_a;
SELECT kind FROM idem.claim_idempotency_key('a.orders', 'by owner', 'h');
SET ROLE idem_so_dave;
SELECT kind FROM idem.claim_idempotency_key('a.orders', 'by team', 'h');
SELECT error_of($$SELECT idem.claim_idempotency_key('b.orders', 'by team', 'h')$$) AS dave_on_b;
SET ROLE idem_so_bob;
SELECT kind FROM idem.claim_idempotency_key('b.orders', 'by bob', 'h');
-- An uncovered scope is open while idem.require_scope_owner is off.
SELECT kind FROM idem.claim_idempotency_key('c.orders', 'by bob', 'h');
RESET ROLE;

-- The boolean and the check called directly; a NULL scope.
SET ROLE idem_so_alice;
SELECT s AS scope, idem.may_use_scope(s) AS alice_may
  FROM unnest(ARRAY['a.', 'a.orders', 'a', 'b.orders', 'c.orders', '']) s ORDER BY s COLLATE "C";
SELECT idem.may_use_scope(NULL) AS null_scope;
SELECT idem.check_scope_owner('a.orders') AS check_own;
SELECT error_of($$SELECT idem.check_scope_owner('b.orders')$$) AS check_other;
SELECT error_of($$SELECT idem.check_scope_owner(NULL)$$) AS check_null;
RESET ROLE;

-- ---- the longest prefix wins ----
-- '' covers every scope; a nested prefix takes its part of a tenant's.
CREATE ROLE idem_so_admins NOLOGIN IN ROLE idem_so_caller;
INSERT INTO idem.scope_owner VALUES ('', 'idem_so_tenant_b'), ('a.admin.', 'idem_so_admins');
SET ROLE idem_so_alice;
SELECT s AS scope, idem.may_use_scope(s) AS alice_may
  FROM unnest(ARRAY['a.orders', 'a.admin.', 'a.admin.users', 'a.adminx', 'a.admin', 'c.orders', '']) s ORDER BY s COLLATE "C";
SELECT error_of($$SELECT idem.claim_idempotency_key('a.admin.users', 'k', 'h')$$) AS nested;
SET ROLE idem_so_bob;
SELECT s AS scope, idem.may_use_scope(s) AS bob_may
  FROM unnest(ARRAY['a.orders', 'a.admin.users', 'c.orders', 'zzz']) s ORDER BY s COLLATE "C";
RESET ROLE;
DELETE FROM idem.scope_owner WHERE scope_prefix IN ('', 'a.admin.');

-- ---- a change of owner is seen at the next call of the same session ----
SET ROLE idem_so_alice;
SELECT idem.may_use_scope('a.orders') AS alice_before;
RESET ROLE;
UPDATE idem.scope_owner SET owner = 'idem_so_tenant_b' WHERE scope_prefix = 'a.';
SET ROLE idem_so_alice;
SELECT error_of($$SELECT idem.peek('a.orders', 'succ')$$) AS alice_after;
SET ROLE idem_so_bob;
SELECT kind FROM idem.peek('a.orders', 'succ');
RESET ROLE;
-- Undone in a transaction that rolls back: the cache is dropped again.
BEGIN;
UPDATE idem.scope_owner SET owner = 'idem_so_tenant_a' WHERE scope_prefix = 'a.';
SET LOCAL ROLE idem_so_alice;
SELECT idem.may_use_scope('a.orders') AS alice_inside;
ROLLBACK;
SET ROLE idem_so_alice;
SELECT idem.may_use_scope('a.orders') AS alice_after_rollback;
RESET ROLE;
UPDATE idem.scope_owner SET owner = 'idem_so_tenant_a' WHERE scope_prefix = 'a.';
-- A membership granted or revoked counts at once (Postgres's own role cache).
REVOKE idem_so_tenant_a FROM idem_so_alice;
SET ROLE idem_so_alice;
SELECT idem.may_use_scope('a.orders') AS alice_revoked;
RESET ROLE;
GRANT idem_so_tenant_a TO idem_so_alice;
SET ROLE idem_so_alice;
SELECT idem.may_use_scope('a.orders') AS alice_granted_again;
RESET ROLE;

-- ---- a dropped owner: refused to all but superusers ----
CREATE ROLE idem_so_gone NOLOGIN;
GRANT idem_so_gone TO idem_so_alice;
INSERT INTO idem.scope_owner VALUES ('g.', 'idem_so_gone');
DROP ROLE idem_so_gone;
SET ROLE idem_so_alice;
SELECT error_of($$SELECT idem.claim_idempotency_key('g.orders', 'k', 'h')$$) AS dropped_owner;
RESET ROLE;
SELECT kind FROM idem.claim_idempotency_key('g.orders', 'k', 'h') AS superuser_on_dropped_owner;
DELETE FROM idem.scope_owner WHERE scope_prefix = 'g.';

-- ---- idem.require_scope_owner ----
-- Only a superuser sets it: a tenant cannot turn it off.
SET ROLE idem_so_alice;
SELECT state_of($$SET idem.require_scope_owner = on$$) AS tenant_sets;
RESET ROLE;
SET idem.require_scope_owner = on;
SET ROLE idem_so_alice;
SELECT state_of($$SET idem.require_scope_owner = off$$) AS tenant_turns_off;
-- Covered scopes as before; an uncovered one is refused to a non-member of
-- the extension's owner.
SELECT kind FROM idem.claim_idempotency_key('a.orders', 'required', 'h');
SELECT error_of($$SELECT idem.claim_idempotency_key('c.orders', 'required', 'h')$$) AS uncovered;
SELECT error_of($$SELECT idem.outbox_put('c.orders', 'required', 'receipt', '{}')$$) AS uncovered_put;
RESET ROLE;
-- The extension's owner is the owner of idem.scope_owner: made a
-- non-superuser here, it and its members pass uncovered scopes.
SELECT relowner::regrole AS ext_owner FROM pg_class WHERE oid = 'idem.scope_owner'::regclass \gset
CREATE ROLE idem_so_admin NOLOGIN IN ROLE idem_so_caller;
CREATE ROLE idem_so_erin NOLOGIN IN ROLE idem_so_caller, idem_so_admin;
ALTER TABLE idem.scope_owner OWNER TO idem_so_admin;
SET ROLE idem_so_admin;
SELECT kind FROM idem.claim_idempotency_key('c.orders', 'by admin', 'h');
SELECT error_of($$SELECT idem.claim_idempotency_key('a.orders', 'by admin', 'h')$$) AS admin_on_covered;
SET ROLE idem_so_erin;
SELECT kind FROM idem.claim_idempotency_key('c.orders', 'by erin', 'h');
SET ROLE idem_so_bob;
SELECT error_of($$SELECT idem.claim_idempotency_key('c.orders', 'by bob 2', 'h')$$) AS bob_uncovered;
RESET ROLE;
ALTER TABLE idem.scope_owner OWNER TO :"ext_owner";
SET ROLE idem_so_erin;
SELECT state_of($$SELECT idem.claim_idempotency_key('c.orders', 'by erin 2', 'h')$$) AS erin_after_owner_change;
RESET ROLE;
RESET idem.require_scope_owner;

-- ---- scope_policy: a covered scope's row is its owner's members' ----
SET ROLE idem_so_alice;
INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('a.orders', 3);
SET ROLE idem_so_bob;
INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('b.orders', 3);
SELECT error_of($$INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('a.other', 3)$$) AS insert_other;
SELECT error_of($$UPDATE idem.scope_policy SET max_attempts = 9 WHERE scope = 'a.orders'$$) AS update_other;
SELECT error_of($$UPDATE idem.scope_policy SET scope = 'a.stolen' WHERE scope = 'b.orders'$$) AS move_into_other;
SELECT error_of($$DELETE FROM idem.scope_policy WHERE scope = 'a.orders'$$) AS delete_other;
SELECT error_of($$TRUNCATE idem.scope_policy$$) AS truncate_with_other;
UPDATE idem.scope_policy SET max_attempts = 4 WHERE scope = 'b.orders';
-- The owner table is not the tenant's to write.
SELECT state_of($$INSERT INTO idem.scope_owner VALUES ('a.orders.', 'idem_so_tenant_b')$$) AS owner_insert;
SELECT state_of($$UPDATE idem.scope_owner SET owner = 'idem_so_tenant_b'$$) AS owner_update;
SELECT state_of($$DELETE FROM idem.scope_owner$$) AS owner_delete;
SELECT state_of($$TRUNCATE idem.scope_owner$$) AS owner_truncate;
RESET ROLE;
SELECT scope, max_attempts FROM idem.scope_policy ORDER BY 1;
TRUNCATE idem.scope_policy;

-- ---- outbox_lease: a relay leases only the events of its scopes ----
DELETE FROM idem.outbox_event;
SELECT idem.outbox_put('b.orders', 'k' || i, 'receipt', '{}') IS NOT NULL AS put
  FROM generate_series(1, 3) i;
SELECT idem.outbox_put('a.orders', 'k1', 'receipt', '{}') IS NOT NULL AS put;
SELECT idem.outbox_put('c.orders', 'k1', 'receipt', '{}') IS NOT NULL AS put;
-- An aggregate id both tenants use: alice's later event does not wait for
-- bob's earlier one, which her relay could never publish; bob's relay still
-- gets his in order.
SELECT idem.outbox_put('b.orders', 'agg1', 'receipt', '{}', 'order', '42') IS NOT NULL AS put;
SELECT idem.outbox_put('a.orders', 'agg2', 'receipt', '{}', 'order', '42') IS NOT NULL AS put;
-- The batch limit counts only events alice may lease: her one event, not
-- nothing behind bob's three older ones.
SET ROLE idem_so_alice;
SELECT scope, key FROM idem.outbox_lease(1);
SELECT scope, key FROM idem.outbox_lease(10) ORDER BY scope, key;
RESET ROLE;
-- bob's relay was never blocked by alice's: his events are all still pending.
SELECT scope, key, status FROM idem.outbox_event ORDER BY id;
SET ROLE idem_so_bob;
SELECT scope, key FROM idem.outbox_lease(10) ORDER BY scope, key;
RESET ROLE;

-- ---- outbox_published, outbox_failed: settled only by a role of the event's scope ----
-- A lease fence orders relays; it authorises nothing (fences come from one
-- sequence). alice, holding the fence of bob's lease, is refused before the
-- event's status or fence is compared, with a wrong fence alike, and her
-- session's idem.outbox_max_attempts cannot make his event dead.
SELECT id AS b_event, lease_fence AS b_fence FROM idem.outbox_event
 WHERE scope = 'b.orders' AND key = 'k1' \gset
SET ROLE idem_so_alice;
SET idem.outbox_max_attempts = 1;
SELECT error_of(format($$SELECT idem.outbox_published(%s, %s)$$, :b_event, :b_fence + 1000))
       AS publish_theirs_wrong_fence;
SELECT error_of(format($$SELECT idem.outbox_failed(%s, %s, 'killed')$$, :b_event, :b_fence))
       AS kill_theirs;
SELECT error_of(format($$SELECT idem.outbox_published(%s, %s)$$, :b_event, :b_fence))
       AS publish_theirs;
SELECT error_of(format($$SELECT idem.outbox_failed(%s, %s, 'killed')$$, :b_event, :b_fence + 1000))
     = error_of(format($$SELECT idem.outbox_published(%s, %s)$$, :b_event, :b_fence))
       AS same_refusal_whatever_the_fence;
-- An id no event has: the lost lease a member gets too (no scope to name).
SELECT error_of($$SELECT idem.outbox_published(9000000001, 1)$$) AS publish_no_event;
SELECT error_of($$SELECT idem.outbox_failed(9000000001, 1, 'killed')$$) AS fail_no_event;
RESET idem.outbox_max_attempts;
RESET ROLE;
-- bob's event is as his relay leased it, and his relay settles it.
SELECT scope, key, status, attempt_count, lease_fence = :b_fence AS same_lease, last_error
  FROM idem.outbox_event WHERE id = :b_event;
SET ROLE idem_so_bob;
SELECT idem.outbox_published(:b_event, :b_fence) AS bob_publishes;
RESET ROLE;
-- With idem.require_scope_owner on, an uncovered event is the extension
-- owner's: no relay of a tenant leases it.
SELECT idem.outbox_put('c.orders', 'k2', 'receipt', '{}') IS NOT NULL AS put;
SET idem.require_scope_owner = on;
SET ROLE idem_so_alice;
SELECT scope, key FROM idem.outbox_lease(10) ORDER BY scope, key;
RESET ROLE;
SELECT scope, key FROM idem.outbox_lease(10) ORDER BY scope, key;
RESET idem.require_scope_owner;

-- ---- run_maintenance: judged as the worker's round ----
-- An operator who owns no scope runs the completers: the claim of a key for
-- its completer is the worker's, and each completer's calls are judged as
-- its owner's, as in the process the worker starts for it.
CREATE ROLE idem_so_operator NOLOGIN;
GRANT USAGE ON SCHEMA idem TO idem_so_operator;
GRANT EXECUTE ON FUNCTION idem.run_maintenance() TO idem_so_operator;
CREATE FUNCTION so_complete(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $$ SELECT idem.mark_succeeded(scope, key, fence, 200) $$;
CREATE FUNCTION so_complete_other(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $$ SELECT idem.mark_succeeded(scope, key, fence, 200) $$;
ALTER FUNCTION so_complete(text, text, bigint, text, integer) OWNER TO idem_so_alice;
ALTER FUNCTION so_complete_other(text, text, bigint, text, integer) OWNER TO idem_so_bob;
INSERT INTO idem.scope_policy (scope, completer) VALUES
    ('a.maint', 'so_complete(text, text, bigint, text, integer)'),
    ('a.maint_other', 'so_complete_other(text, text, bigint, text, integer)');
SELECT count(*) AS abandoned FROM idem.claim_idempotency_key('a.maint', 'k', 'h')
 UNION ALL SELECT count(*) FROM idem.claim_idempotency_key('a.maint_other', 'k', 'h');
UPDATE idem.idempotency_request r
   SET status = 'failed_retryable', failure_code = 'abandoned', failure_message = 'test',
       locked_until = NULL, finished_at = now() - interval '1 minute',
       updated_at = now() - CASE r.scope WHEN 'a.maint' THEN interval '2 minutes' ELSE interval '1 minute' END
 WHERE r.scope IN ('a.maint', 'a.maint_other');
SET ROLE idem_so_operator;
SELECT r->'completer_runs' AS runs, r->'completer_successes' AS successes,
       r->'completer_failures' AS failures
  FROM idem.run_maintenance() r;
RESET ROLE;
-- alice's completer finished its key; bob's, not a member of tenant a, was
-- refused and the key waits for its lock.
SELECT scope, status, response_code FROM idem.idempotency_request
 WHERE scope IN ('a.maint', 'a.maint_other') ORDER BY scope;
TRUNCATE idem.scope_policy;
DROP FUNCTION so_complete(text, text, bigint, text, integer),
    so_complete_other(text, text, bigint, text, integer);
REVOKE ALL ON FUNCTION idem.run_maintenance() FROM idem_so_operator;
REVOKE USAGE ON SCHEMA idem FROM idem_so_operator;
DROP ROLE idem_so_operator;

-- Clean up.
DELETE FROM idem.outbox_event;
TRUNCATE idem.consumed_message;
TRUNCATE idem.idempotency_request;
DELETE FROM idem.scope_owner;
REVOKE ALL ON idem.scope_policy FROM idem_so_caller;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA idem FROM idem_so_caller;
REVOKE USAGE ON SCHEMA idem FROM idem_so_caller;
DROP ROLE idem_so_erin, idem_so_admin, idem_so_admins, idem_so_dave, idem_so_team,
    idem_so_alice, idem_so_bob, idem_so_tenant_a, idem_so_tenant_b, idem_so_caller;
