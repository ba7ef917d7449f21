-- idem 1.1 -> 1.2, released with 1.2.0: never edited again. The 1.2 base script (sql/idem--1.2.sql) is generated from
-- the 1.1 base script and this file by the Makefile, so the two ways to 1.2
-- build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== maintenance: one worker round in one call (DESIGN.md "Version 1.2") ====
-- What the worker does in a round, for servers without it (no preload, or
-- the portable engine, driven by pg_cron): sweep_stale, keys past
-- max_attempts, the completers, purge_expired, purge_consumed,
-- purge_published, each in batches of idem.batch_size and at most a fixed
-- number of batches per stage, so one call is bounded. It runs in the
-- caller's transaction; each completer runs as the role that owns it, in a
-- subtransaction of its own (docs/operating.md, "run_maintenance").
-- Returns the counts per stage (README, "run_maintenance").
CREATE FUNCTION idem.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_run_maintenance'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- An operator's call, like purge_expired.
REVOKE ALL ON FUNCTION idem.run_maintenance() FROM PUBLIC;
-- ==== end maintenance ====

-- ==== messages: dumped with the keys, and settings read when only a placeholder ====
-- pg_dump carries an extension's table rows only when the script marks the
-- table. 1.1 marked the key table, its fence sequence and the policies, not
-- the inbox and the outbox: a dump restored elsewhere (a backup, a move to
-- the other engine) would consume its messages again and reissue outbox ids
-- and lease fences that relays already hold.
SELECT pg_catalog.pg_extension_config_dump('idem.consumed_message', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_event', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_event_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('idem.outbox_lease_fence_seq', '');

-- A lost lease's error names the event's status and the caller's fence,
-- never the event's lease fence (1.1 printed it): an error shows no fence but
-- the caller's own.
CREATE OR REPLACE FUNCTION idem.outbox_lease_lost(event_id bigint, lease_fence bigint, what text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'the lease on this outbox event was lost'
        USING ERRCODE = 'P4012',
              DETAIL = pg_catalog.format('outbox_%s(%s, %s): the event is not leased under this fence (%s).',
                                         what, event_id, COALESCE(lease_fence::text, 'NULL'),
                                         COALESCE((SELECT pg_catalog.format('status %s', e.status)
                                                     FROM idem.outbox_event e
                                                    WHERE e.id OPERATOR(pg_catalog.=) event_id),
                                                  'no such event')),
              HINT = 'Another relay leased the event after this lease ran out; drop the result, do not retry it.';
END
$$;

-- Without the library (the portable engine) idem.outbox_* are placeholders:
-- one that was SET and then RESET, or SET LOCAL in an earlier transaction,
-- reads as '' rather than NULL, which must mean "not set" too.
-- (1.2, scopes owned by roles) A lease fence orders relays, it authorises
-- nothing: the event's scope is checked first, before its status or fence
-- is compared, as outbox_published does (src/messages/outbox.cpp). So the
-- caller's idem.outbox_max_attempts bounds only events of its own scopes.
CREATE OR REPLACE FUNCTION idem.outbox_failed(
    id bigint, lease_fence bigint, error text, retry_after interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_attempts integer := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_max_attempts', true), ''), '10')::integer;
    base interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_base', true), ''), '1s')::interval;
    cap interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_max', true), ''), '10min')::interval;
    event_scope text;
BEGIN
    -- idem.interval_is_positive is the rule of every interval idem takes
    -- (section intervals, below); zero is allowed here: retry at once.
    IF error IS NULL OR error OPERATOR(pg_catalog.=) ''
       OR NOT idem.interval_is_positive(retry_after, true) THEN
        RAISE EXCEPTION 'error must be given and retry_after must be finite and not negative'
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('outbox_failed(%s): error %L, retry_after %s.', id, error,
                                             COALESCE(retry_after::text, 'NULL')),
                  HINT = 'Say why the delivery failed; pass retry_after NULL for the exponential backoff.';
    END IF;
    -- An id no event has is a lost lease below, as for a member.
    SELECT e.scope INTO event_scope FROM idem.outbox_event e
     WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id;
    IF FOUND THEN
        PERFORM idem.check_scope_owner(event_scope);
    END IF;
    UPDATE idem.outbox_event e
       SET status = CASE WHEN e.attempt_count OPERATOR(pg_catalog.>=) max_attempts
                         THEN 'dead'::idem.outbox_status ELSE 'pending'::idem.outbox_status END,
           available_at = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) COALESCE(
               retry_after,
               LEAST(cap, base OPERATOR(pg_catalog.*) pg_catalog.power(2, LEAST(e.attempt_count OPERATOR(pg_catalog.-) 1, 30)))
                   OPERATOR(pg_catalog.*) (0.5 OPERATOR(pg_catalog.+) (pg_catalog.random() OPERATOR(pg_catalog.*) 0.5))),
           leased_until = NULL, lease_fence = NULL, last_error = error
     WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id
       AND e.status OPERATOR(pg_catalog.=) 'leased'
       AND e.lease_fence OPERATOR(pg_catalog.=) outbox_failed.lease_fence;
    IF NOT FOUND THEN
        PERFORM idem.outbox_lease_lost(id, lease_fence, 'failed');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION idem.purge_published(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_retention', true), ''), '7d');
    deleted bigint;
BEGIN
    PERFORM idem.check_batch_limit(batch_limit);
    IF setting OPERATOR(pg_catalog.=) '-1' THEN
        RETURN 0;
    END IF;
    WITH doomed AS (
        SELECT d.ctid AS tid FROM idem.outbox_event d
         WHERE d.status OPERATOR(pg_catalog.=) 'published'
           AND d.published_at OPERATOR(pg_catalog.<=)
               (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) setting::pg_catalog.interval)
         ORDER BY d.published_at LIMIT batch_limit FOR UPDATE SKIP LOCKED)
    DELETE FROM idem.outbox_event r
     WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;
-- ==== end messages ====

-- ==== adapters: the calls an adapter needs (DESIGN.md "Version 1.2") ====
-- An adapter (Powertools' persistence layer, an HTTP middleware) forgets a
-- key whose handler failed, so a corrected request may run under it, and
-- reads a key by its name alone. Both are on the request path: granted by
-- hand with claim_idempotency_key (README, "Privileges"), never to PUBLIC.

-- The owner gives its key up: the row is deleted, the next claim is
-- new_claim with any request hash and a fence above every fence before
-- (idem.fence_seq). P4012 stale fence, P4015 missing or not owned, P4004
-- NULL fence (src/keys/release.cpp).
CREATE FUNCTION idem.release(scope text, key text, fence bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_release'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- What a claim with the stored request hash would answer, written nowhere
-- and without a fence; NULL for a key a claim would start afresh
-- (src/keys/peek.cpp). VOLATILE: it reads the row as it is now, as a claim does.
CREATE FUNCTION idem.peek(scope text, key text)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_peek'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION idem.release(text, text, bigint), idem.peek(text, text) FROM PUBLIC;
-- ==== end adapters ====

-- ==== owners: scopes owned by roles (DESIGN.md "Version 1.2: scopes owned by roles") ====
-- A scope is covered by the row with the longest scope_prefix it starts with
-- ('' covers every scope). Every call that reads or writes a covered scope's
-- keys, a covered consumer's messages or a covered scope's outbox events
-- refuses, with 42501, a calling role that is not a member of the owner
-- (README, "Tenants and services"). The calling role is the role the session
-- runs as: SET ROLE's, else the login's; idem's own SECURITY DEFINER rights
-- do not count. With idem.require_scope_owner on, an uncovered scope refuses
-- every role that is not a member of the extension's owner (the owner of
-- this table). A role dropped while it owns a prefix leaves an OID no role
-- is a member of: the scope is then refused to all but superusers.
CREATE TABLE idem.scope_owner (
    scope_prefix text PRIMARY KEY,
    owner regrole NOT NULL,
    CONSTRAINT scope_owner_prefix_length CHECK (pg_catalog.length(scope_prefix) <= 255)
);

COMMENT ON TABLE idem.scope_owner IS
    'Scopes owned by roles: a scope is covered by the longest scope_prefix it starts with, and only members of its owner may use it.';

-- Raises 42501 naming the scope when the calling role may not use it; the
-- calls of idem that are written in SQL run it first (the C ones check in
-- C, src/policy/scope_owner.hpp). It reads idem.scope_owner, so it runs as
-- the extension's owner; it reveals only whether the caller may use a scope,
-- which a claim of it would reveal too. PUBLIC may run it: the triggers
-- below run as the role that writes idem.scope_policy.
CREATE FUNCTION idem.check_scope_owner(scope text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_check_scope_owner'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- The same rule as a boolean, for the outbox lease's filter: a relay leases
-- only events of scopes its role may use (NULL scope: false).
CREATE FUNCTION idem.may_use_scope(scope text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_may_use_scope'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

GRANT EXECUTE ON FUNCTION idem.check_scope_owner(text), idem.may_use_scope(text) TO PUBLIC;

-- The calls' caches of this table are dropped as idem.scope_policy's are: a
-- relcache invalidation of the table at commit (src/policy/scope_policy.cpp).
CREATE FUNCTION idem.scope_owner_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_scope_policy_changed'
LANGUAGE C;

CREATE TRIGGER scope_owner_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem.scope_owner
    FOR EACH STATEMENT EXECUTE FUNCTION idem.scope_owner_changed();

-- Every change of ownership goes to the server log at LOG, with who made it
-- (the session's login and the role it acted as): ownership decides which
-- service may read which stored answers. Not SECURITY DEFINER: it reads
-- nothing and writes only the log.
CREATE FUNCTION idem.scope_owner_audit()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'TRUNCATE' THEN
        RAISE LOG 'idem: every scope owner removed (TRUNCATE idem.scope_owner) by role % (session user %)',
            current_user, session_user;
        RETURN NULL;
    END IF;
    RAISE LOG 'idem: scope owner % by role % (session user %): %',
        pg_catalog.lower(TG_OP), current_user, session_user,
        CASE TG_OP
            WHEN 'INSERT' THEN pg_catalog.format('prefix %L owned by %s', NEW.scope_prefix, NEW.owner)
            WHEN 'DELETE' THEN pg_catalog.format('prefix %L was owned by %s', OLD.scope_prefix, OLD.owner)
            ELSE pg_catalog.format('prefix %L owned by %s, was prefix %L owned by %s',
                                   NEW.scope_prefix, NEW.owner, OLD.scope_prefix, OLD.owner)
        END;
    RETURN NULL;
END
$$;

CREATE TRIGGER scope_owner_audit
    AFTER INSERT OR UPDATE OR DELETE ON idem.scope_owner
    FOR EACH ROW EXECUTE FUNCTION idem.scope_owner_audit();
CREATE TRIGGER scope_owner_audit_truncate
    AFTER TRUNCATE ON idem.scope_owner
    FOR EACH STATEMENT EXECUTE FUNCTION idem.scope_owner_audit();

-- A policy decides a scope's retention, attempts and completer: for a
-- covered scope only a member of its owner writes it, old row and new.
-- TRUNCATE skips row triggers, so it is checked row by row too. The
-- extension's owner (the owner of idem.scope_owner) passes: it may rewrite
-- any scope's owner anyway, and a pg_restore of policies and owners, run as
-- that owner, must not depend on which table's data comes first.
CREATE FUNCTION idem.scope_policy_check_owner()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_has_role(current_user,
           (SELECT c.relowner FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) 'idem.scope_owner'::pg_catalog.regclass),
           'MEMBER') THEN
        RETURN CASE TG_OP WHEN 'DELETE' THEN OLD WHEN 'TRUNCATE' THEN NULL ELSE NEW END;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'TRUNCATE' THEN
        PERFORM idem.check_scope_owner(p.scope) FROM idem.scope_policy p;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM idem.check_scope_owner(OLD.scope);
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    PERFORM idem.check_scope_owner(NEW.scope);
    RETURN NEW;
END
$$;

CREATE TRIGGER scope_policy_check_owner
    BEFORE INSERT OR UPDATE OR DELETE ON idem.scope_policy
    FOR EACH ROW EXECUTE FUNCTION idem.scope_policy_check_owner();
CREATE TRIGGER scope_policy_check_owner_truncate
    BEFORE TRUNCATE ON idem.scope_policy
    FOR EACH STATEMENT EXECUTE FUNCTION idem.scope_policy_check_owner();

-- The extension's owner writes owners and may grant it; monitoring reads them.
REVOKE ALL ON TABLE idem.scope_owner FROM PUBLIC;
GRANT SELECT ON TABLE idem.scope_owner TO pg_monitor;
REVOKE ALL ON FUNCTION idem.scope_owner_changed(), idem.scope_owner_audit(),
    idem.scope_policy_check_owner() FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('idem.scope_owner', '');

-- typical_duration reads idem.scope_owner for its check, so it now runs as
-- the extension's owner, pinned as every SECURITY DEFINER function of idem.
ALTER FUNCTION idem.typical_duration(text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- The two calls written in SQL check first (a SQL function answers with its
-- last statement).
CREATE OR REPLACE FUNCTION idem.retry_after(scope text, claim idem.claim)
RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT idem.check_scope_owner($1);
  SELECT CASE
    WHEN ($2).kind OPERATOR(pg_catalog.<>) 'processing_active'::idem.claim_kind
      OR ($2).locked_until IS NULL THEN NULL
    WHEN ($2).locked_until OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() THEN 0
    ELSE LEAST(
      pg_catalog.ceil(EXTRACT(EPOCH FROM ($2).locked_until
                              OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())),
      GREATEST(1, pg_catalog.ceil(EXTRACT(EPOCH FROM
        COALESCE(idem.typical_duration($1), pg_catalog.make_interval(secs => 1))))))::integer
  END
$$;

CREATE OR REPLACE FUNCTION idem.stored_answer(scope text, key text)
RETURNS idem.claim
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT idem.check_scope_owner($1);
  SELECT ROW(CASE r.status
               WHEN 'succeeded'::idem.idempotency_status THEN 'replay_success'
               WHEN 'failed_final'::idem.idempotency_status THEN 'final_failure'
               ELSE 'retryable_failure' END::idem.claim_kind,
             NULL::bigint, r.attempt_count, r.recovery_point, r.response_code,
             r.response_body, r.result_ref_type, r.result_ref_id, r.failure_code,
             r.failure_message, r.locked_until, r.expires_at)::idem.claim
    FROM idem.idempotency_request r
   WHERE r.scope OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2
$$;
-- ==== end owners ====

-- ==== storage: the churned tables keep their pages (docs/operating.md "Storage settings") ====
-- Each of these tables deletes every row one retention after writing it.
-- When a vacuum finds the file's last pages empty it gives them back to
-- the file system, under an ACCESS EXCLUSIVE lock that every claim, message
-- and event queues behind (and that standbys replay the same way), and the
-- table grows them back within seconds. Kept, the table stays at the size
-- its churn needs (bench/README.md, "Flat under churn").
ALTER TABLE idem.idempotency_request SET (vacuum_truncate = false);
ALTER TABLE idem.consumed_message SET (vacuum_truncate = false);
ALTER TABLE idem.outbox_event SET (vacuum_truncate = false);
-- ==== end storage ====

-- ==== stats: the inbox's and the outbox's purges counted (docs/operating.md "Counters") ====
-- 1.1 counted the keys the worker purged (rows_purged) and nothing of the
-- messages and events it purges in the same round, so a dashboard could not
-- tell an inbox purge that keeps up from one that stopped. The worker and
-- idem.run_maintenance() count both as each batch commits; the view and its
-- function are made again with the two columns (and their grants). The
-- library still fills 1.0's and 1.1's shorter declarations, so idem.stats
-- keeps working between a new library and ALTER EXTENSION UPDATE.
DROP VIEW idem.stats;
DROP FUNCTION idem.stats_counters();
CREATE FUNCTION idem.stats_counters(
    OUT datid oid,
    OUT new_claim bigint,
    OUT replay_success bigint,
    OUT processing_active bigint,
    OUT processing_stale bigint,
    OUT retryable_failure bigint,
    OUT final_failure bigint,
    OUT request_mismatches bigint,
    OUT stale_fences bigint,
    OUT marked_succeeded bigint,
    OUT marked_failed_retryable bigint,
    OUT marked_failed_final bigint,
    OUT recovery_points_set bigint,
    OUT rows_swept bigint,
    OUT rows_purged bigint,
    OUT worker_rounds bigint,
    OUT waits_started bigint,
    OUT waits_answered bigint,
    OUT waits_timed_out bigint,
    OUT wait_time_us bigint,
    OUT polling_fallbacks bigint,
    OUT session_bound_takeovers bigint,
    OUT completer_runs bigint,
    OUT completer_successes bigint,
    OUT completer_failures bigint,
    OUT wait_attempts bigint,
    OUT wakeups_sent bigint,
    OUT messages_purged bigint,
    OUT events_purged bigint,
    OUT failed_rounds bigint,
    OUT last_worker_round timestamptz,
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE VIEW idem.stats AS
SELECT s.datid, d.datname,
       s.new_claim, s.replay_success, s.processing_active, s.processing_stale,
       s.retryable_failure, s.final_failure, s.request_mismatches, s.stale_fences,
       s.marked_succeeded, s.marked_failed_retryable, s.marked_failed_final,
       s.recovery_points_set, s.rows_swept, s.rows_purged,
       s.worker_rounds, s.waits_started, s.waits_answered, s.waits_timed_out,
       CASE WHEN s.waits_answered + s.waits_timed_out > 0
            THEN s.wait_time_us::float8 / 1000.0 / (s.waits_answered + s.waits_timed_out)
       END AS mean_wait_ms,
       s.polling_fallbacks, s.session_bound_takeovers,
       s.completer_runs, s.completer_successes, s.completer_failures,
       s.wait_attempts, s.wakeups_sent,
       s.messages_purged, s.events_purged, s.failed_rounds,
       s.last_worker_round, s.stats_reset
  FROM idem.stats_counters() s
  LEFT JOIN pg_catalog.pg_database d ON d.oid = s.datid
 WHERE s.datid IS NULL OR d.oid IS NOT NULL;

COMMENT ON VIEW idem.stats IS
    'idem''s counters since stats_reset, one row per database; needs shared_preload_libraries = ''idem''.';

REVOKE ALL ON FUNCTION idem.stats_counters() FROM PUBLIC;
REVOKE ALL ON TABLE idem.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.stats_counters() TO pg_monitor;
GRANT SELECT ON TABLE idem.stats TO pg_monitor;
-- ==== end stats ====

-- ==== failed rounds: a worker round that fails is shown and counted (docs/worker.md "Failed rounds") ====
-- Before, a round that failed (a trigger raising on the key table, say)
-- still recorded its end: idem.worker_status said idle with a fresh
-- last_round_end and a rising total_rounds, and the alert on
-- now() - last_round_end never fired. A failed round now moves neither; the
-- worker shows state 'failing', the last error, since when the rounds fail
-- and how many did, and idem.stats counts them (failed_rounds, in the stats
-- section above). The library still fills 1.0's and 1.1's eight columns.
DROP VIEW idem.worker_status;
DROP FUNCTION idem.worker_status();
CREATE FUNCTION idem.worker_status(
    OUT database name, OUT pid integer, OUT state text,
    OUT last_round_start timestamptz, OUT last_round_end timestamptz,
    OUT last_round_swept bigint, OUT last_round_purged bigint,
    OUT total_rounds bigint,
    OUT failed_rounds bigint, OUT failing_since timestamptz,
    OUT last_error text, OUT last_error_sqlstate text, OUT last_error_scope text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_worker_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW idem.worker_status AS SELECT * FROM idem.worker_status();

COMMENT ON VIEW idem.worker_status IS
    'What the idem background worker of each database of idem.database is doing, what its last round did, and whether its rounds fail.';

REVOKE ALL ON FUNCTION idem.worker_status() FROM PUBLIC;
REVOKE ALL ON TABLE idem.worker_status FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.worker_status() TO pg_monitor;
GRANT SELECT ON TABLE idem.worker_status TO pg_monitor;
-- ==== end failed rounds ====
