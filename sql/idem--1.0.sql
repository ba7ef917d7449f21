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
