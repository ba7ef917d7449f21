-- idem 1.0 -> 1.1, released with 1.1.0: never edited again. The 1.1 base
-- script (sql/idem--1.1.sql) is generated from 1.0 and this file by the
-- Makefile, so the two ways to 1.1 build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== search_path: every SECURITY DEFINER function runs under a pinned path ====
-- A SECURITY DEFINER function runs with the rights of idem's owner (a
-- superuser, usually). Each of them is pinned to search_path = pg_catalog,
-- pg_temp (PostgreSQL, "Writing SECURITY DEFINER Functions Safely"), so no
-- operator, function or type a caller puts on its own search_path can be
-- picked up by a statement idem runs: PostgreSQL sets the path around each
-- call (fmgr_security_definer), and a kept SPI plan, analysed again
-- whenever the current path differs from the one it was planned under, is
-- always analysed under this one. Statements stay schema-qualified as well
-- (defence in depth).
-- 1.0's functions are pinned here; 1.1's in their CREATE below.
-- sql/61_hostile_role.sql lists every SECURITY DEFINER function of schema
-- idem and fails for one that is not pinned or that it does not call.
ALTER FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.set_recovery_point(text, text, bigint, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.purge_expired(integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.sweep_stale(integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.lookup(text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.evict(text, text, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION idem.force_expire(text, text, boolean) SET search_path = pg_catalog, pg_temp;
-- ==== end search_path ====

-- ==== invariants: one CHECK constraint calling one C function ====
-- At every INSERT and UPDATE statement PostgreSQL reads each CHECK
-- expression of the table back from its stored text, plans and compiles it
-- (ExecRelCheck), so a CHECK costs what its expression weighs. Measured per
-- new-key lifecycle (a claim and a mark_succeeded; bench/lifecycle_instructions.sh
-- and bench/shapes/, PostgreSQL 15): 1.0's thirteen constraints ~713k
-- instructions, more than the rest of the lifecycle (~465k); the same rules
-- as one SQL CHECK just as much (~719k); one CHECK calling one C function
-- over the fifteen columns the rules read ~129k. The function enforces the
-- thirteen rules (src/row_invariants.cpp); when one breaks, it raises 23514
-- (check_violation) itself, naming the rule by its 1.0 constraint name, so
-- a hand-written UPDATE is refused as before. NOT NULL stays on the columns.
--
-- It returns true or raises: a CHECK that merely returned false would make
-- PostgreSQL name the one constraint, not the rule. Not STRICT: most of the
-- rules are about which columns are NULL.
CREATE FUNCTION idem.request_invariants_hold(
    scope text, key text, request_hash text, status idem.idempotency_status,
    recovery_point text, fence bigint, attempt_count integer,
    locked_until timestamptz, response_code integer, response_body jsonb,
    failure_code text, failure_message text,
    created_at timestamptz, finished_at timestamptz, expires_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_request_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem.request_invariants_hold(
    text, text, text, idem.idempotency_status, text, bigint, integer, timestamptz,
    integer, jsonb, text, text, timestamptz, timestamptz, timestamptz) IS
    'The invariants of an idem.idempotency_request row: true, or error 23514 naming the rule the row breaks.';

-- The executor checks EXECUTE on a CHECK constraint's function as the role
-- that writes the row, so PUBLIC keeps it: every role that may write the
-- table (idem's SECURITY DEFINER functions, an operator, a role an operator
-- granted UPDATE) has its rows judged, as 1.0's plain CHECKs did, instead of
-- getting 42501. The function reads only its arguments and returns true or
-- raises: it reveals nothing and changes nothing, like idem.request_hash.
GRANT EXECUTE ON FUNCTION idem.request_invariants_hold(
    text, text, text, idem.idempotency_status, text, bigint, integer, timestamptz,
    integer, jsonb, text, text, timestamptz, timestamptz, timestamptz) TO PUBLIC;

-- The CHECK constraint passes the whole row and this overload hands the
-- columns to the function above. PostgreSQL reads a CHECK expression back
-- from its text and plans it at every write statement: with fifteen column
-- arguments that was 23% of a new key's instructions, with one whole-row
-- argument 6% (src/row_check.hpp; bench/README.md, "The physical floor").
CREATE FUNCTION idem.request_invariants_hold(request idem.idempotency_request)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_request_row_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.request_invariants_hold(idem.idempotency_request) IS
    'The invariants of an idem.idempotency_request row, given whole: true, or error 23514 naming the rule the row breaks.';
GRANT EXECUTE ON FUNCTION idem.request_invariants_hold(idem.idempotency_request) TO PUBLIC;

-- One statement, so the table's ACCESS EXCLUSIVE lock (DROP CONSTRAINT
-- needs it) is taken once and held only for catalog changes. NOT VALID:
-- the thirteen constraints this statement drops guaranteed every existing
-- row already keeps the same rules, so a validating scan would prove
-- nothing and would block every claim for as long as it reads a large
-- table. New and updated rows are checked from this statement on.
ALTER TABLE idem.idempotency_request
    DROP CONSTRAINT scope_length,
    DROP CONSTRAINT key_length,
    DROP CONSTRAINT request_hash_present,
    DROP CONSTRAINT fence_positive,
    DROP CONSTRAINT attempt_count_positive,
    DROP CONSTRAINT recovery_point_present,
    DROP CONSTRAINT response_code_is_http_status,
    DROP CONSTRAINT expires_after_creation,
    DROP CONSTRAINT finished_means_succeeded,
    DROP CONSTRAINT processing_is_locked_and_open,
    DROP CONSTRAINT outcome_is_unlocked_and_dated,
    DROP CONSTRAINT success_has_response,
    DROP CONSTRAINT failure_has_code,
    ADD CONSTRAINT idempotency_request_invariants
        CHECK (idem.request_invariants_hold(idempotency_request)) NOT VALID;

-- An empty table is validated at once (a fresh CREATE EXTENSION runs this
-- too: the 1.1 base script is 1.0 plus this file), so a new install shows
-- no NOT VALID and builds the same catalog as an upgraded empty one. A table
-- with keys stays NOT VALID until an operator runs
--   ALTER TABLE idem.idempotency_request VALIDATE CONSTRAINT idempotency_request_invariants;
-- which scans under SHARE UPDATE EXCLUSIVE: claims and completions go on.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM idem.idempotency_request) THEN
        ALTER TABLE idem.idempotency_request VALIDATE CONSTRAINT idempotency_request_invariants;
    END IF;
END
$$;
-- ==== end invariants ====

-- ==== clients: Retry-After worth sending, and the stored answer at completion ====
-- How long this scope's requests take (claim to outcome), a running estimate
-- kept per database and scope by mark_succeeded / mark_failed
-- (src/request_durations.hpp); NULL while nothing is known.
CREATE FUNCTION idem.typical_duration(scope text)
RETURNS interval
AS 'MODULE_PATHNAME', 'idem_typical_duration'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION idem.typical_duration(text) IS
    'How long a request of this scope typically takes from claim to outcome, estimated from recent completions; NULL when unknown.';

-- The Retry-After, in whole seconds, for a claim that answered
-- processing_active: the scope's typical duration rounded up (1 second when
-- unknown), never past the end of the owner's lock, 0 once the lock has run
-- out (a retry may take the key over at once); NULL for any other kind,
-- which has nothing to wait for. (LEAST and GREATEST are SQL syntax, not
-- functions a search_path could redirect.) SECURITY DEFINER so that EXECUTE
-- on it alone is enough: it reads nothing but the estimate.
CREATE FUNCTION idem.retry_after(scope text, claim idem.claim)
RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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

COMMENT ON FUNCTION idem.retry_after(text, idem.claim) IS
    'Seconds a twin should wait before retrying a processing_active claim: the scope''s typical duration, never past the lock''s end; NULL for other kinds.';

-- mark_succeeded / mark_failed, then the answer exactly as a replay of the
-- key will carry it: send this answer's response_body (as text) the first
-- time, and every replay is the same bytes. kind is what a claim of the key
-- now answers (replay_success, final_failure, or retryable_failure, which a
-- retry takes over); fence is NULL: this call grants nothing. C, so that
-- (f(...)).* marks once per row, as (claim(...)).* claims once
-- (src/statement_memo.hpp); the answer is idem.stored_answer's.
CREATE FUNCTION idem.mark_succeeded_returning(scope text, key text, fence bigint,
    response_code integer, response_body jsonb DEFAULT NULL,
    result_ref_type text DEFAULT NULL, result_ref_id text DEFAULT NULL)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_mark_succeeded_returning'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION idem.mark_failed_returning(scope text, key text, fence bigint,
    retryable boolean, failure_code text, failure_message text DEFAULT NULL,
    response_code integer DEFAULT NULL, response_body jsonb DEFAULT NULL)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_mark_failed_returning'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- The completed row as the claim type; for the two functions above only
-- (src/marked_answer.cpp).
CREATE FUNCTION idem.stored_answer(scope text, key text)
RETURNS idem.claim
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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

REVOKE ALL ON FUNCTION
    idem.typical_duration(text),
    idem.retry_after(text, idem.claim),
    idem.mark_succeeded_returning(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed_returning(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.stored_answer(text, text)
FROM PUBLIC;
-- ==== end clients ====

-- ==== inbox: consume-once for message consumers and the transactional outbox ====
-- DESIGN.md "Consume-once for message consumers (the inbox)" and
-- "Transactional outbox"; README "Message consumers" and "Outbox".
--
-- The request-path functions (consume_once, set_consumed_result,
-- outbox_put, outbox_lease, outbox_published) are C++ with kept SPI plans
-- (src/inbox.cpp, src/outbox.cpp), like the key store's claim: as PL/pgSQL
-- the call, SET search_path and one SPI query per statement made
-- consume_once 0.4-0.5x (new) and 0.7-0.8x (replay) a plain INSERT ... ON
-- CONFLICT DO NOTHING (bench/README.md, "1.1: inbox and outbox"). The
-- purges, outbox_failed and the helpers stay PL/pgSQL: called rarely, and
-- their statements are the whole of them.

-- Settings (defined by the library, src/message_maintenance.cpp): the C
-- functions read the variables; the PL/pgSQL ones read them with
-- current_setting(..., true) and the same default as the C definition when
-- this backend has not loaded the library yet (no call of a C function so
-- far), so a function gives the same answer before and after the load.

-- The inbox's and outbox's row rules: one CHECK per table calling one C
-- function, as the key table's (section invariants above, and for the same
-- reason: PostgreSQL reads each CHECK back from its text and compiles it at
-- every INSERT and UPDATE). With a CHECK per rule, consume_once spent a
-- quarter of its new-message throughput on that (bench/README.md). Each
-- function returns true or raises 23514 naming the broken rule; PUBLIC may
-- execute them, as request_invariants_hold, since the executor checks
-- EXECUTE as the role that writes the row.
CREATE FUNCTION idem.consumed_message_invariants_hold(
    consumer text, message_id text, message_hash text,
    consumed_at timestamptz, expires_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_consumed_message_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.consumed_message_invariants_hold(text, text, text, timestamptz, timestamptz) IS
    'The rules of an idem.consumed_message row: true, or error 23514 naming the rule the row breaks.';
GRANT EXECUTE ON FUNCTION idem.consumed_message_invariants_hold(text, text, text, timestamptz, timestamptz)
    TO PUBLIC;

CREATE TABLE idem.consumed_message (
    consumer        text        NOT NULL,
    message_id      text        NOT NULL,
    message_hash    text        NOT NULL,
    consumed_at     timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    result_ref_type text,
    result_ref_id   text,
    PRIMARY KEY (consumer, message_id)
);
-- The CHECK passes the whole row, as the key table's does: this overload
-- hands the columns to the function above (src/row_check.hpp).
CREATE FUNCTION idem.consumed_message_invariants_hold(message idem.consumed_message)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_consumed_message_row_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.consumed_message_invariants_hold(idem.consumed_message) IS
    'The rules of an idem.consumed_message row, given whole: true, or error 23514 naming the rule the row breaks.';
GRANT EXECUTE ON FUNCTION idem.consumed_message_invariants_hold(idem.consumed_message) TO PUBLIC;
-- consumer_length, message_id_length (1 to 255 characters),
-- message_hash_present, expires_after_consumption (expires_at > consumed_at)
ALTER TABLE idem.consumed_message ADD CONSTRAINT consumed_message_invariants
    CHECK (idem.consumed_message_invariants_hold(consumed_message));
-- The purger's index: the oldest expirations first.
CREATE INDEX consumed_message_expiry ON idem.consumed_message (expires_at);

COMMENT ON TABLE idem.consumed_message IS
    'Messages consumed once per consumer (idem.consume_once); purged after expires_at.';

-- consume_once and set_consumed_result are C (src/inbox.cpp), as the key
-- store's claim is: consume_once looks first, reading the row through the
-- primary key (src/key_probe.hpp), so a replay takes no lock and no
-- transaction id and writes no WAL; only an
-- absent or expired message goes to one kept INSERT ... ON CONFLICT, which
-- waits for a twin's in-flight insert (when the twin commits, false; when it
-- rolls back, true). The retention: the argument, else the consumer's
-- idem.scope_policy retention (or keep_forever), else idem.inbox_retention.
-- SECURITY DEFINER, pinned to search_path = pg_catalog, pg_temp as every
-- SECURITY DEFINER function of idem is (section search_path above).
CREATE FUNCTION idem.consume_once(
    consumer text, message_id text, message_hash text,
    retention interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_consume_once'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- Records what consuming the message produced, in the consumer's
-- transaction. P4020 when the message is not consumed (or expired).
CREATE FUNCTION idem.set_consumed_result(
    consumer text, message_id text, result_ref_type text, result_ref_id text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_set_consumed_result'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- Purges at most batch_limit expired consumed messages, oldest first,
-- skipping rows live transactions hold. The worker runs it every round.
CREATE FUNCTION idem.purge_consumed(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted bigint;
BEGIN
    PERFORM idem.check_batch_limit(batch_limit);
    WITH doomed AS (
        SELECT d.ctid AS tid FROM idem.consumed_message d
         WHERE d.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
         ORDER BY d.expires_at LIMIT batch_limit FOR UPDATE SKIP LOCKED)
    DELETE FROM idem.consumed_message r
     WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

CREATE FUNCTION idem.check_batch_limit(batch_limit integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF batch_limit IS NULL OR batch_limit OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION 'batch_limit must be positive'
            USING ERRCODE = 'P4004', DETAIL = pg_catalog.format('batch_limit was %s.', COALESCE(batch_limit::text, 'NULL')),
                  HINT = 'Pass a positive number of rows.';
    END IF;
END
$$;

-- The outbox. An event is pending, leased to a relay (until leased_until,
-- under lease_fence), published, or dead (max attempts reached; stays for
-- an operator).
CREATE TYPE idem.outbox_status AS ENUM ('pending', 'leased', 'published', 'dead');

-- Lease fences: every lease, re-leases included, draws a new one.
CREATE SEQUENCE idem.outbox_lease_fence_seq AS bigint;

-- The outbox's row rules (see idem.consumed_message_invariants_hold).
CREATE FUNCTION idem.outbox_event_invariants_hold(
    scope text, key text, event_type text, status idem.outbox_status,
    leased_until timestamptz, lease_fence bigint, published_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_outbox_event_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.outbox_event_invariants_hold(
    text, text, text, idem.outbox_status, timestamptz, bigint, timestamptz) IS
    'The rules of an idem.outbox_event row: true, or error 23514 naming the rule the row breaks.';
GRANT EXECUTE ON FUNCTION idem.outbox_event_invariants_hold(
    text, text, text, idem.outbox_status, timestamptz, bigint, timestamptz) TO PUBLIC;

CREATE TABLE idem.outbox_event (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope           text        NOT NULL,
    key             text        NOT NULL,
    event_type      text        NOT NULL,
    payload         jsonb       NOT NULL,
    aggregate_type  text,
    aggregate_id    text,
    headers         jsonb,
    delivery_key    text        NOT NULL,
    status          idem.outbox_status NOT NULL DEFAULT 'pending',
    available_at    timestamptz NOT NULL,
    attempt_count   integer     NOT NULL DEFAULT 0,
    lease_fence     bigint,
    leased_until    timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL,
    published_at    timestamptz,
    CONSTRAINT outbox_event_identity UNIQUE (scope, key, event_type)
);
-- The CHECK passes the whole row (src/row_check.hpp), as the inbox's does.
CREATE FUNCTION idem.outbox_event_invariants_hold(event idem.outbox_event)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_outbox_event_row_invariants_hold'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.outbox_event_invariants_hold(idem.outbox_event) IS
    'The rules of an idem.outbox_event row, given whole: true, or error 23514 naming the rule the row breaks.';
GRANT EXECUTE ON FUNCTION idem.outbox_event_invariants_hold(idem.outbox_event) TO PUBLIC;
-- outbox_scope_length, outbox_key_length (1 to 255 characters),
-- outbox_event_type_present, outbox_leased_has_lease ('leased' exactly
-- when leased_until and lease_fence are set), outbox_published_is_dated
-- ('published' exactly when published_at is set)
ALTER TABLE idem.outbox_event ADD CONSTRAINT outbox_event_invariants
    CHECK (idem.outbox_event_invariants_hold(outbox_event));
-- The relays' scan: open events in id order.
CREATE INDEX outbox_event_open ON idem.outbox_event (id)
    WHERE status IN ('pending', 'leased');
-- The ordering rule's probe: an earlier open event of the same aggregate.
-- aggregate_id leads and aggregate_type stays out: the probe compares the
-- types with IS NOT DISTINCT FROM, which no index can serve, and with the
-- type first the planner fell back to scanning every open event for each
-- candidate (22 ms a lease with 17,000 events open; bench/README.md).
CREATE INDEX outbox_event_open_aggregate ON idem.outbox_event (aggregate_id, id)
    WHERE status IN ('pending', 'leased') AND aggregate_id IS NOT NULL;
-- The purger's scan.
CREATE INDEX outbox_event_published ON idem.outbox_event (published_at)
    WHERE status = 'published';

COMMENT ON TABLE idem.outbox_event IS
    'Transactional outbox: events put in business transactions, leased and marked by relays.';

-- C (src/outbox.cpp). Puts of one aggregate take a transaction-level
-- advisory lock on it (class 1768187245, the bytes of "idem") before
-- drawing their id, so an aggregate's events commit in id order and a relay
-- never sees event 2 while event 1's transaction is still open. The commit
-- notifies idem_outbox; a rolled-back put notifies nothing.
CREATE FUNCTION idem.outbox_put(
    scope text, key text, event_type text, payload jsonb,
    aggregate_type text DEFAULT NULL, aggregate_id text DEFAULT NULL,
    headers jsonb DEFAULT NULL, available_at timestamptz DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_outbox_put'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- Due events for one relay (C, src/outbox.cpp; the statement is in
-- src/statements.cpp). An event is due when it is pending (or its lease ran
-- out) and available, and no earlier event of its aggregate is pending or
-- leased: an aggregate's events go out one at a time, in id order (dead and
-- published ones do not hold it back). SKIP LOCKED: two relays never wait
-- for, or get, the same event; a row another relay leased meanwhile is
-- re-checked on its new version and left out.
CREATE FUNCTION idem.outbox_lease(
    batch_limit integer DEFAULT 100, lease interval DEFAULT '30 seconds',
    event_types text[] DEFAULT NULL)
RETURNS TABLE (id bigint, lease_fence bigint, scope text, key text,
               event_type text, aggregate_type text, aggregate_id text, payload jsonb,
               headers jsonb, attempt_count integer, delivery_key text)
AS 'MODULE_PATHNAME', 'idem_outbox_lease'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE ROWS 100
SET search_path = pg_catalog, pg_temp;

-- The lease check of published and failed: the event must be leased under
-- this fence (its lease may have run out, as long as no relay leased it
-- again). Anything else is a lost lease, P4012.
CREATE FUNCTION idem.outbox_lease_lost(event_id bigint, lease_fence bigint, what text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'the lease on this outbox event was lost'
        USING ERRCODE = 'P4012',
              DETAIL = pg_catalog.format('outbox_%s(%s, %s): the event is not leased under this fence (%s).',
                                         what, event_id, COALESCE(lease_fence::text, 'NULL'),
                                         COALESCE((SELECT pg_catalog.format('status %s, fence %s', e.status, e.lease_fence)
                                                                FROM idem.outbox_event e
                                                               WHERE e.id OPERATOR(pg_catalog.=) event_id),
                                                             'no such event')),
              HINT = 'Another relay leased the event after this lease ran out; drop the result, do not retry it.';
END
$$;

-- C (src/outbox.cpp), with outbox_lease_lost's words for a lost lease.
CREATE FUNCTION idem.outbox_published(id bigint, lease_fence bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_outbox_published'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- Backoff after a failure: retry_after when given, else base * 2^(n-1)
-- capped at idem.outbox_backoff_max, then jittered down to between half
-- and all of it ("equal jitter"), so relays that failed together do not
-- come back together. Dead after idem.outbox_max_attempts attempts.
CREATE FUNCTION idem.outbox_failed(
    id bigint, lease_fence bigint, error text, retry_after interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_attempts integer := COALESCE(pg_catalog.current_setting('idem.outbox_max_attempts', true), '10')::integer;
    base interval := COALESCE(pg_catalog.current_setting('idem.outbox_backoff_base', true), '1s')::interval;
    cap interval := COALESCE(pg_catalog.current_setting('idem.outbox_backoff_max', true), '10min')::interval;
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

-- Purges at most batch_limit events published longer ago than
-- idem.outbox_retention (-1: never), oldest first. Dead events stay.
CREATE FUNCTION idem.purge_published(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := COALESCE(pg_catalog.current_setting('idem.outbox_retention', true), '7d');
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

-- For operators: one row, counts by status and the age of the oldest event
-- still to be delivered.
CREATE VIEW idem.outbox_summary AS
SELECT pg_catalog.count(*) FILTER (WHERE e.status OPERATOR(pg_catalog.=) 'pending') AS pending,
       pg_catalog.count(*) FILTER (WHERE e.status OPERATOR(pg_catalog.=) 'leased'
                                     AND e.leased_until OPERATOR(pg_catalog.>) pg_catalog.now()) AS leased,
       pg_catalog.count(*) FILTER (WHERE e.status OPERATOR(pg_catalog.=) 'leased'
                                     AND e.leased_until OPERATOR(pg_catalog.<=) pg_catalog.now()) AS lease_expired,
       pg_catalog.count(*) FILTER (WHERE e.status OPERATOR(pg_catalog.=) 'published') AS published,
       pg_catalog.count(*) FILTER (WHERE e.status OPERATOR(pg_catalog.=) 'dead') AS dead,
       pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(e.created_at)
           FILTER (WHERE e.status IN ('pending', 'leased')) AS oldest_pending_age
  FROM idem.outbox_event e;

REVOKE ALL ON TABLE idem.consumed_message, idem.outbox_event, idem.outbox_summary FROM PUBLIC;
REVOKE ALL ON SEQUENCE idem.outbox_lease_fence_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION
    idem.check_batch_limit(integer),
    idem.consume_once(text, text, text, interval),
    idem.set_consumed_result(text, text, text, text),
    idem.purge_consumed(integer),
    idem.outbox_put(text, text, text, jsonb, text, text, jsonb, timestamptz),
    idem.outbox_lease(integer, interval, text[]),
    idem.outbox_lease_lost(bigint, bigint, text),
    idem.outbox_published(bigint, bigint),
    idem.outbox_failed(bigint, bigint, text, interval),
    idem.purge_published(integer)
FROM PUBLIC;
GRANT SELECT ON TABLE idem.outbox_summary TO pg_monitor;
-- ==== end inbox ====

-- ==== lease: claim_or_wait, extend_lock, bind_lock_to_session ====
-- The token of the session a claim bound its key to
-- (idem.bind_lock_to_session; src/session_binding.hpp); NULL when unbound.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE idem.idempotency_request ADD COLUMN bound_session bigint;

COMMENT ON COLUMN idem.idempotency_request.bound_session IS
    'Token of the session that owns this processing key under idem.bind_lock_to_session; the key is stale once that session ends.';

-- Claims as claim_idempotency_key does, but waits (for at most max_wait)
-- instead of answering processing_active: README.md, "Waiting for a twin".
CREATE FUNCTION idem.claim_or_wait(
    scope text, key text, request_hash text, max_wait interval,
    claimed_by text DEFAULT NULL,
    lock_timeout interval DEFAULT NULL,
    retention interval DEFAULT NULL)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_claim_or_wait'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- The owner's longer lease; never shortens a lock.
CREATE FUNCTION idem.extend_lock(scope text, key text, fence bigint, extend_by interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_extend_lock'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- Request-path functions, granted by hand as the 1.0 ones are.
REVOKE ALL ON FUNCTION
    idem.claim_or_wait(text, text, text, interval, text, interval, interval),
    idem.extend_lock(text, text, bigint, interval)
FROM PUBLIC;

-- The counters gain the waits', the bindings' and the completer's columns,
-- and what wakes waiters (wait_attempts, wakeups_sent; src/wait_slots.hpp):
-- the view and its function are made again with them (and their grants).
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
-- ==== end lease ====

-- ==== policy: per-scope policy, max_attempts and the completer (docs/policy.md) ====
-- One row per scope (exact name). NULL means "not set here": for every call
-- an explicit argument wins, then this row, then the setting. Claims read the
-- table through a per-backend cache (src/scope_policy.cpp) that the statement
-- trigger below invalidates at commit, so a committed change is in force at
-- the next call of every session and a claim never queries the table.
CREATE TABLE idem.scope_policy (
    scope text PRIMARY KEY,
    lock_timeout interval,
    retention interval,
    keep_forever boolean NOT NULL DEFAULT false,
    max_attempts integer,
    bind_lock_to_session boolean,
    completer text,
    completer_delay interval,
    CONSTRAINT scope_policy_scope_length
        CHECK (pg_catalog.length(scope) BETWEEN 1 AND 255),
    CONSTRAINT scope_policy_lock_timeout_positive
        CHECK (lock_timeout > '0'::interval AND pg_catalog.isfinite(lock_timeout)),
    CONSTRAINT scope_policy_retention_positive
        CHECK (retention > '0'::interval AND pg_catalog.isfinite(retention)),
    CONSTRAINT scope_policy_keep_forever_or_retention
        CHECK (NOT (keep_forever AND retention IS NOT NULL)),
    CONSTRAINT scope_policy_max_attempts_positive CHECK (max_attempts >= 1),
    CONSTRAINT scope_policy_completer_delay_positive
        CHECK (completer_delay > '0'::interval AND pg_catalog.isfinite(completer_delay))
);

COMMENT ON TABLE idem.scope_policy IS
    'Per-scope defaults: an explicit argument wins, then this row, then the idem.* setting.';

-- A completer is named by text, not by a regprocedure: pg_upgrade refuses a
-- cluster with a column of a reg* type that holds a function's OID (the OIDs
-- of functions are not carried over), so the name is resolved at each use.
-- This trigger resolves what the writer gave ('s.fn', 'fn', 'fn(text, text,
-- bigint, text, integer)', a regprocedure's text) as the writer's own
-- statement would, on the writer's search_path, and stores the function's
-- fully qualified identity (pg_identify_object's, e.g.
-- 'myschema.fn(pg_catalog.text,pg_catalog.text,bigint,pg_catalog.text,integer)'),
-- which to_regprocedure reads back as the same function under any
-- search_path: the worker does so at each round (src/statements.cpp).
--
-- The function must have the signature the worker calls, and the role that
-- names it must be able to act as the function's owner (be a member of that
-- role): the worker runs it as its owner, so naming a function owned by a
-- more privileged role would run code with rights the writer does not have.
-- Not SECURITY DEFINER: current_user is the writer. No SET search_path
-- either, since the name is the writer's to resolve; every other name here
-- is qualified, so the writer's search_path changes nothing else, and all of
-- it runs with the writer's rights only.
CREATE FUNCTION idem.scope_policy_check_completer()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    given pg_catalog.text := NEW.completer;
    fn pg_catalog.oid;
    why pg_catalog.text;
    f record;
BEGIN
    IF given IS NULL THEN
        RETURN NEW;
    END IF;
    BEGIN
        IF pg_catalog.strpos(given, '(') OPERATOR(pg_catalog.=) 0 THEN
            -- A bare name: the function of that name with a completer's
            -- arguments, else the only function of that name (whose
            -- signature is then refused below).
            fn := pg_catalog.to_regprocedure(pg_catalog.concat(given,
                      '(pg_catalog.text, pg_catalog.text, bigint, pg_catalog.text, integer)'));
            IF fn IS NULL THEN
                fn := pg_catalog.to_regproc(given);
            END IF;
        ELSE
            fn := pg_catalog.to_regprocedure(given);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        -- Before 16, to_regproc and to_regprocedure raise on a malformed
        -- name or an unknown argument type instead of answering NULL.
        why := SQLERRM;
        fn := NULL;
    END;
    IF fn IS NULL THEN
        RAISE EXCEPTION 'completer % is not a function', pg_catalog.quote_literal(given)
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('scope "%s": %s', NEW.scope,
                      coalesce(why, 'no function of that name and arguments is visible on the search_path')),
                  HINT = 'Name an existing function, as ''myschema.complete'' or '
                         '''myschema.complete(text, text, bigint, text, integer)''.';
    END IF;
    SELECT p.proowner,
           p.prokind OPERATOR(pg_catalog.=) 'f' AND NOT p.proretset
               AND p.prorettype OPERATOR(pg_catalog.=) 'pg_catalog.void'::pg_catalog.regtype
               AND p.proargtypes OPERATOR(pg_catalog.=) pg_catalog.array_to_string(ARRAY[
                   'pg_catalog.text'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                   'pg_catalog.int8'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype,
                   'pg_catalog.int4'::pg_catalog.regtype]::pg_catalog.oid[], ' ')::pg_catalog.oidvector
               AS fits,
           (pg_catalog.pg_identify_object('pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, 0)).identity
      INTO f
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) fn;
    IF NOT f.fits THEN
        RAISE EXCEPTION 'completer % does not have the signature of a completer', f.identity
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('scope "%s"', NEW.scope),
                  HINT = 'A completer is a function (scope text, key text, fence bigint, '
                         'recovery_point text, attempt_count integer) RETURNS void.';
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, f.proowner, 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to name completer %', f.identity
            USING ERRCODE = '42501',
                  DETAIL = pg_catalog.format('scope "%s": the completer runs as its owner %I, and role %I is not a member of it',
                                             NEW.scope, f.proowner::pg_catalog.regrole, current_user),
                  HINT = 'Name a completer owned by a role you are a member of.';
    END IF;
    NEW.completer := f.identity;
    RETURN NEW;
END
$$;

CREATE TRIGGER scope_policy_check_completer
    BEFORE INSERT OR UPDATE ON idem.scope_policy
    FOR EACH ROW EXECUTE FUNCTION idem.scope_policy_check_completer();

-- Sends a relcache invalidation of idem.scope_policy, which other backends
-- receive when the writing transaction commits; each drops its policy cache.
CREATE FUNCTION idem.scope_policy_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_scope_policy_changed'
LANGUAGE C;

CREATE TRIGGER scope_policy_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem.scope_policy
    FOR EACH STATEMENT EXECUTE FUNCTION idem.scope_policy_changed();

-- Nobody but the owner (the extension's owner) writes policies unless
-- granted: an operator grants INSERT, UPDATE, DELETE to the roles that set
-- policy (README, "Per-scope policy"). Monitoring reads them.
REVOKE ALL ON TABLE idem.scope_policy FROM PUBLIC;
GRANT SELECT ON TABLE idem.scope_policy TO pg_monitor;
REVOKE ALL ON FUNCTION idem.scope_policy_check_completer(), idem.scope_policy_changed() FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('idem.scope_policy', '');

-- key_health gains the abandoned keys waiting for their scope's completer:
-- abandoned (swept) or processing with the lock run out, older than the
-- scope's completer_delay (or due now when it has none).
CREATE OR REPLACE VIEW idem.key_health AS
WITH in_flight AS (
    SELECT r.scope,
           count(*) AS processing,
           count(*) FILTER (WHERE r.locked_until <= now()) AS stuck,
           now() - min(r.claimed_at) AS oldest_processing_age
      FROM idem.idempotency_request r
     WHERE r.status = 'processing'
     GROUP BY r.scope),
awaiting_purge AS (
    SELECT r.scope,
           count(*) AS expired_unpurged,
           now() - min(r.expires_at) AS oldest_expired_age
      FROM idem.idempotency_request r
     WHERE r.status <> 'processing' AND r.expires_at <= now()
     GROUP BY r.scope),
awaiting_completer AS (
    SELECT r.scope, count(*) AS awaiting_completer
      FROM idem.scope_policy sp
      JOIN idem.idempotency_request r ON r.scope = sp.scope
     WHERE sp.completer IS NOT NULL AND r.expires_at > now()
       AND (r.status = 'processing' AND r.locked_until <= now()
            OR r.status = 'failed_retryable' AND r.failure_code = 'abandoned')
     GROUP BY r.scope)
SELECT coalesce(f.scope, p.scope, c.scope) AS scope,
       coalesce(f.processing, 0) AS processing,
       coalesce(f.stuck, 0) AS stuck,
       f.oldest_processing_age,
       coalesce(p.expired_unpurged, 0) AS expired_unpurged,
       p.oldest_expired_age,
       coalesce(c.awaiting_completer, 0) AS awaiting_completer
  FROM in_flight f
  FULL JOIN awaiting_purge p ON p.scope = f.scope
  FULL JOIN awaiting_completer c ON c.scope = coalesce(f.scope, p.scope);
-- ==== end policy ====

-- ==== intervals: one rule for every interval idem accepts ====
-- Every interval argument (lock_timeout, retention, max_wait, extend_by,
-- consume_once's retention, outbox_lease's lease, outbox_failed's
-- retry_after) and every interval column of idem.scope_policy is judged by
-- one C rule (src/interval_rule.hpp): finite, and positive from every
-- moment, a month counting as 28 days when added and 31 when subtracted, a
-- day as 24 hours less an hour for a daylight-saving change. PostgreSQL's
-- interval '> 0' counts a month as 30 days and lets '-1 mon 31 days' (no
-- time at all after a 31-day month) through. or_zero: not negative instead
-- (retry_after). NULL for a NULL value, so a CHECK passes "not set here".
-- PUBLIC may execute it: a CHECK runs it as the role that writes the row,
-- and it reads nothing but its arguments.
CREATE FUNCTION idem.interval_is_positive(value interval, or_zero boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_interval_is_positive'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem.interval_is_positive(interval, boolean) IS
    'idem''s rule for intervals: finite and positive from every moment (or not negative, with or_zero).';
GRANT EXECUTE ON FUNCTION idem.interval_is_positive(interval, boolean) TO PUBLIC;

ALTER TABLE idem.scope_policy
    DROP CONSTRAINT scope_policy_lock_timeout_positive,
    DROP CONSTRAINT scope_policy_retention_positive,
    DROP CONSTRAINT scope_policy_completer_delay_positive,
    ADD CONSTRAINT scope_policy_lock_timeout_positive
        CHECK (idem.interval_is_positive(lock_timeout)),
    ADD CONSTRAINT scope_policy_retention_positive
        CHECK (idem.interval_is_positive(retention)),
    ADD CONSTRAINT scope_policy_completer_delay_positive
        CHECK (idem.interval_is_positive(completer_delay));
-- ==== end intervals ====
