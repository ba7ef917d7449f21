-- idem 1.0: a durable, race-free idempotency-key store.
\echo Use "CREATE EXTENSION idem" to load this file. \quit

CREATE TYPE idem.idempotency_status AS ENUM (
    'processing', 'succeeded', 'failed_retryable', 'failed_final');

CREATE TYPE idem.claim_kind AS ENUM (
    'new_claim', 'replay_success', 'processing_active',
    'processing_stale', 'retryable_failure', 'final_failure');

-- One sequence for every key: a fence is never reused, not even after the
-- key it was issued for expired, was purged and was claimed afresh.
CREATE SEQUENCE idem.fence_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE idem.idempotency_request (
    scope           text NOT NULL,
    key             text NOT NULL,
    request_hash    text NOT NULL,
    status          idem.idempotency_status NOT NULL,
    recovery_point  text NOT NULL DEFAULT 'started',
    fence           bigint NOT NULL,
    attempt_count   integer NOT NULL DEFAULT 1,
    claimed_by      text,
    claimed_at      timestamptz NOT NULL,
    locked_until    timestamptz,
    response_code   integer,
    response_body   jsonb,
    result_ref_type text,
    result_ref_id   text,
    failure_code    text,
    failure_message text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (scope, key),
    CONSTRAINT scope_length CHECK (char_length(scope) BETWEEN 1 AND 255),
    CONSTRAINT key_length CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT request_hash_present CHECK (request_hash <> ''),
    CONSTRAINT fence_positive CHECK (fence > 0),
    CONSTRAINT attempt_count_positive CHECK (attempt_count >= 1),
    CONSTRAINT recovery_point_present CHECK (recovery_point <> ''),
    CONSTRAINT response_code_is_http_status CHECK (response_code BETWEEN 100 AND 599),
    CONSTRAINT expires_after_creation CHECK (expires_at > created_at),
    -- 'finished' is reached by mark_succeeded and by nothing else.
    CONSTRAINT finished_means_succeeded
        CHECK ((recovery_point = 'finished') = (status = 'succeeded')),
    -- An owned, in-flight key holds a lock and has no outcome yet.
    CONSTRAINT processing_is_locked_and_open CHECK (
        status <> 'processing'
        OR (locked_until IS NOT NULL AND finished_at IS NULL
            AND response_code IS NULL AND response_body IS NULL)),
    -- Every outcome releases the lock and records when it happened.
    CONSTRAINT outcome_is_unlocked_and_dated CHECK (
        status = 'processing' OR (locked_until IS NULL AND finished_at IS NOT NULL)),
    CONSTRAINT success_has_response CHECK (
        status <> 'succeeded'
        OR (response_code IS NOT NULL AND failure_code IS NULL AND failure_message IS NULL)),
    CONSTRAINT failure_has_code CHECK (
        status NOT IN ('failed_retryable', 'failed_final')
        OR (failure_code IS NOT NULL AND failure_code <> ''))
);

COMMENT ON TABLE idem.idempotency_request IS
    'One row per (scope, key): the claim, its owner''s fence and checkpoint, and the replayable outcome.';

-- The sweeper walks in-flight keys by lock expiry; the purger walks outcomes by expiry.
CREATE INDEX idempotency_request_sweep_idx
    ON idem.idempotency_request (locked_until) WHERE status = 'processing';
CREATE INDEX idempotency_request_purge_idx
    ON idem.idempotency_request (expires_at) WHERE status <> 'processing';

-- pg_dump must carry the keys: a restored database that forgot them would
-- replay nothing and charge twice.
SELECT pg_catalog.pg_extension_config_dump('idem.idempotency_request', '');
SELECT pg_catalog.pg_extension_config_dump('idem.fence_seq', '');

CREATE TYPE idem.claim AS (
    kind            idem.claim_kind,
    fence           bigint,
    attempt_count   integer,
    recovery_point  text,
    response_code   integer,
    response_body   jsonb,
    result_ref_type text,
    result_ref_id   text,
    failure_code    text,
    failure_message text,
    locked_until    timestamptz,
    expires_at      timestamptz
);

-- The key-store functions are SECURITY DEFINER: applications reach the table
-- only through them, so no client can forge an outcome or a fence. Every
-- statement they run names its schema, operators included, so the caller's
-- search_path cannot redirect them (see test/sql/search_path.sql).
CREATE FUNCTION idem.claim_idempotency_key(
    scope text, key text, request_hash text,
    claimed_by text DEFAULT NULL,
    lock_timeout interval DEFAULT NULL,
    retention interval DEFAULT NULL)
RETURNS idem.claim
AS 'MODULE_PATHNAME', 'idem_claim_idempotency_key'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

CREATE FUNCTION idem.mark_succeeded(
    scope text, key text, fence bigint, response_code integer,
    response_body jsonb DEFAULT NULL,
    result_ref_type text DEFAULT NULL,
    result_ref_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_mark_succeeded'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

CREATE FUNCTION idem.mark_failed(
    scope text, key text, fence bigint, retryable boolean,
    failure_code text,
    failure_message text DEFAULT NULL,
    response_code integer DEFAULT NULL,
    response_body jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_mark_failed'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

CREATE FUNCTION idem.set_recovery_point(
    scope text, key text, fence bigint, recovery_point text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_set_recovery_point'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

CREATE FUNCTION idem.purge_expired(batch_limit integer DEFAULT 10000)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_purge_expired'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

CREATE FUNCTION idem.sweep_stale(batch_limit integer DEFAULT 10000)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_sweep_stale'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

-- Fingerprints are pure functions of their argument; NULL in, NULL out.
CREATE FUNCTION idem.request_hash(jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_request_hash_jsonb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idem.request_hash(bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_request_hash_bytea'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Nothing is granted to PUBLIC but the schema and the pure fingerprint
-- functions. An application role gets the key-store API with
-- GRANT USAGE ON SCHEMA idem TO app; plus EXECUTE on the four request-path
-- functions; maintenance (purge/sweep) is for operators (README, "Privileges").
REVOKE ALL ON TABLE idem.idempotency_request FROM PUBLIC;
REVOKE ALL ON SEQUENCE idem.fence_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION
    idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.set_recovery_point(text, text, bigint, text),
    idem.purge_expired(integer),
    idem.sweep_stale(integer)
FROM PUBLIC;
GRANT USAGE ON SCHEMA idem TO PUBLIC;
GRANT EXECUTE ON FUNCTION idem.request_hash(jsonb), idem.request_hash(bytea) TO PUBLIC;

-- ==== stats: live counters, key-store views and by-key tools (readme/stats.md) ====

-- The counters in shared memory, one row per database (datid NULL: databases
-- past the 64th, counted together). Raises 55000 when idem was not preloaded.
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
    OUT last_worker_round timestamptz,
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- Rows of dropped databases are left out (their row is recycled when needed).
CREATE VIEW idem.stats AS
SELECT s.datid, d.datname,
       s.new_claim, s.replay_success, s.processing_active, s.processing_stale,
       s.retryable_failure, s.final_failure, s.request_mismatches, s.stale_fences,
       s.marked_succeeded, s.marked_failed_retryable, s.marked_failed_final,
       s.recovery_points_set, s.rows_swept, s.rows_purged,
       s.worker_rounds, s.last_worker_round, s.stats_reset
  FROM idem.stats_counters() s
  LEFT JOIN pg_catalog.pg_database d ON d.oid = s.datid
 WHERE s.datid IS NULL OR d.oid IS NOT NULL;

COMMENT ON VIEW idem.stats IS
    'idem''s counters since stats_reset, one row per database; needs shared_preload_libraries = ''idem''.';

-- Resets this database's counters, or every database's.
CREATE FUNCTION idem.stats_reset(all_databases boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What needs attention, per scope, from the two partial indexes only, so its
-- cost follows the number of in-flight and expired keys, never the table's
-- size: in-flight keys (sweep index), the oldest one's age, the stuck ones
-- whose lock has run out and that nobody swept or took over yet, and finished
-- keys past expires_at that the purger has not deleted yet (purge index).
CREATE VIEW idem.key_health AS
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
     GROUP BY r.scope)
SELECT coalesce(f.scope, p.scope) AS scope,
       coalesce(f.processing, 0) AS processing,
       coalesce(f.stuck, 0) AS stuck,
       f.oldest_processing_age,
       coalesce(p.expired_unpurged, 0) AS expired_unpurged,
       p.oldest_expired_age
  FROM in_flight f FULL JOIN awaiting_purge p ON p.scope = f.scope;

COMMENT ON VIEW idem.key_health IS
    'Per scope: in-flight, stuck and expired-but-unpurged keys; reads only the partial indexes.';

-- The whole picture per scope: rows by status (one pass over the table; its
-- cost grows with the table, so query it by hand, scrape key_health), with
-- key_health's columns beside them.
CREATE VIEW idem.key_summary AS
WITH by_status AS (
    SELECT r.scope,
           count(*) AS total,
           count(*) FILTER (WHERE r.status = 'processing') AS processing,
           count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE r.status = 'failed_retryable') AS failed_retryable,
           count(*) FILTER (WHERE r.status = 'failed_final') AS failed_final
      FROM idem.idempotency_request r
     GROUP BY r.scope)
SELECT s.scope, s.total, s.processing, s.succeeded, s.failed_retryable, s.failed_final,
       coalesce(h.stuck, 0) AS stuck,
       h.oldest_processing_age,
       coalesce(h.expired_unpurged, 0) AS expired_unpurged,
       h.oldest_expired_age
  FROM by_status s LEFT JOIN idem.key_health h ON h.scope = s.scope;

COMMENT ON VIEW idem.key_summary IS
    'Per scope: rows by status plus key_health''s columns; reads the whole table.';

-- The by-key tools for operators and support engineers. SECURITY DEFINER, as
-- the key-store functions are; each use is logged with the session user, the
-- role in effect and application_name.
CREATE FUNCTION idem.lookup(scope text, key text)
RETURNS SETOF idem.idempotency_request
AS 'MODULE_PATHNAME', 'idem_lookup'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE ROWS 1;

-- Deletes a key so a client may reuse it; an in-flight key only with force.
CREATE FUNCTION idem.evict(scope text, key text, force boolean DEFAULT false)
RETURNS idem.idempotency_request
AS 'MODULE_PATHNAME', 'idem_evict'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

-- Makes a key count as expired now, so the next claim starts it afresh; an
-- in-flight key only with force (it then ends failed_final/'expired').
CREATE FUNCTION idem.force_expire(scope text, key text, force boolean DEFAULT false)
RETURNS idem.idempotency_request
AS 'MODULE_PATHNAME', 'idem_force_expire'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE;

-- Nothing for PUBLIC. Monitoring (members of pg_monitor, as postgres_exporter
-- usually is) may read the counters and the views; resets and the by-key
-- tools are granted by hand (readme/stats.md).
REVOKE ALL ON FUNCTION
    idem.stats_counters(),
    idem.stats_reset(boolean),
    idem.lookup(text, text),
    idem.evict(text, text, boolean),
    idem.force_expire(text, text, boolean)
FROM PUBLIC;
REVOKE ALL ON TABLE idem.stats, idem.key_health, idem.key_summary FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.stats_counters() TO pg_monitor;
GRANT SELECT ON TABLE idem.stats, idem.key_health, idem.key_summary TO pg_monitor;

-- ==== worker: the background worker's last round, per database ====
-- One row per database of idem.database. Needs idem in
-- shared_preload_libraries (SQLSTATE 55000 otherwise). Nothing for PUBLIC;
-- monitoring (pg_monitor) may read it, like idem.stats.
CREATE FUNCTION idem.worker_status(
    OUT database name, OUT pid integer, OUT state text,
    OUT last_round_start timestamptz, OUT last_round_end timestamptz,
    OUT last_round_swept bigint, OUT last_round_purged bigint,
    OUT total_rounds bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_worker_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW idem.worker_status AS SELECT * FROM idem.worker_status();

COMMENT ON VIEW idem.worker_status IS
    'What the idem background worker of each database of idem.database is doing, and what its last round did.';

REVOKE ALL ON FUNCTION idem.worker_status() FROM PUBLIC;
REVOKE ALL ON TABLE idem.worker_status FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.worker_status() TO pg_monitor;
GRANT SELECT ON TABLE idem.worker_status TO pg_monitor;
-- ==== end worker ====
