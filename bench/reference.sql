-- The reference peer: idem's contract written the classic way, in PL/pgSQL,
-- after the design the reference reading describes (insert-or-nothing, then
-- lock the row with SELECT ... FOR UPDATE and classify it in procedural code;
-- an UPDATE to take a key over or to record an outcome; purge with a DELETE).
-- It is a fair, competent version of that design, not a straw man: every
-- name is schema-qualified (no SET search_path clause on the functions), the
-- clock is read once per call, and the table is a copy of idem's with the
-- same columns, constraints and indexes. Requires the extension idem (for the
-- shape of the table and its status enum). Loaded by bench/run.

CREATE SCHEMA ref;

CREATE TYPE ref.claim_kind AS ENUM (
    'new_claim', 'replay_success', 'processing_active',
    'processing_stale', 'retryable_failure', 'final_failure');

CREATE TYPE ref.claim AS (
    kind            ref.claim_kind,
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

CREATE SEQUENCE ref.fence_seq AS bigint MINVALUE 1 NO CYCLE;

-- The same rules as the floor's: thirteen plain-SQL CHECKs (bench/plain_invariants.sql).
CREATE TABLE ref.idempotency_request
    (LIKE idem.idempotency_request INCLUDING ALL EXCLUDING CONSTRAINTS);
\set invariants_table ref.idempotency_request
\ir plain_invariants.sql

-- The claim as the design has it: the insert decides who creates the key,
-- the row lock serialises everybody who finds it there.
CREATE FUNCTION ref.claim_idempotency_key(
    p_scope text, p_key text, p_request_hash text,
    p_claimed_by text DEFAULT NULL,
    p_lock_timeout interval DEFAULT NULL,
    p_retention interval DEFAULT NULL)
RETURNS ref.claim
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $fn$
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_lock      interval := coalesce(p_lock_timeout, interval '5 minutes');
    v_retention interval := coalesce(p_retention, interval '24 hours');
    v_expires   timestamptz;
    v_inserted  integer;
    v_row       ref.idempotency_request%ROWTYPE;
    v_kind      ref.claim_kind;
BEGIN
    IF p_scope IS NULL OR p_scope = '' OR char_length(p_scope) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'P4000', MESSAGE = 'idempotency scope is required';
    END IF;
    IF p_key IS NULL OR p_key = '' OR char_length(p_key) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'P4001', MESSAGE = 'idempotency key must be 1-255 characters',
            DETAIL = format('scope %s', p_scope);
    END IF;
    IF p_request_hash IS NULL OR p_request_hash = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'P4003', MESSAGE = 'request hash is required',
            DETAIL = format('scope %s, key %s', p_scope, p_key);
    END IF;
    IF v_lock <= interval '0' OR v_retention <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = 'lock_timeout and retention must be positive';
    END IF;
    v_expires := v_now + v_retention;

    -- A purge may delete the row between our insert and our lock; then we
    -- simply try again.
    FOR attempt IN 1..8 LOOP
        INSERT INTO ref.idempotency_request AS r (
            scope, key, request_hash, status, recovery_point, fence, attempt_count,
            claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at)
        VALUES (
            p_scope, p_key, p_request_hash, 'processing', 'started',
            pg_catalog.nextval('ref.fence_seq'), 1,
            p_claimed_by, v_now, v_now + v_lock, v_now, v_now, v_expires)
        ON CONFLICT (scope, key) DO NOTHING;
        GET DIAGNOSTICS v_inserted = ROW_COUNT;

        SELECT * INTO v_row
        FROM ref.idempotency_request r
        WHERE r.scope = p_scope AND r.key = p_key
        FOR UPDATE;
        EXIT WHEN FOUND;
    END LOOP;
    IF v_row.scope IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P4099', MESSAGE = 'could not claim the key under contention';
    END IF;

    IF v_inserted = 1 THEN
        v_kind := 'new_claim';
    ELSIF v_row.status <> 'processing' AND v_row.expires_at <= v_now THEN
        -- An expired outcome counts as purged: the key starts a new life.
        UPDATE ref.idempotency_request r
        SET request_hash = p_request_hash, status = 'processing', recovery_point = 'started',
            fence = pg_catalog.nextval('ref.fence_seq'), attempt_count = 1,
            claimed_by = p_claimed_by, claimed_at = v_now, locked_until = v_now + v_lock,
            response_code = NULL, response_body = NULL, result_ref_type = NULL,
            result_ref_id = NULL, failure_code = NULL, failure_message = NULL,
            created_at = v_now, updated_at = v_now, finished_at = NULL, expires_at = v_expires
        WHERE r.scope = p_scope AND r.key = p_key
        RETURNING * INTO v_row;
        v_kind := 'new_claim';
    ELSIF v_row.request_hash <> p_request_hash THEN
        RAISE EXCEPTION USING ERRCODE = 'P4002',
            MESSAGE = 'idempotency key was already used for a different request',
            DETAIL = format('scope %s, key %s', p_scope, p_key);
    ELSIF v_row.status = 'succeeded' THEN
        v_kind := 'replay_success';
    ELSIF v_row.status = 'failed_final' THEN
        v_kind := 'final_failure';
    ELSIF v_row.status = 'processing' AND v_row.locked_until > v_now THEN
        v_kind := 'processing_active';
    ELSE
        -- failed_retryable, or processing with an expired lock: take it over.
        v_kind := CASE WHEN v_row.status = 'processing' THEN 'processing_stale'
                       ELSE 'retryable_failure' END;
        UPDATE ref.idempotency_request r
        SET status = 'processing', fence = pg_catalog.nextval('ref.fence_seq'),
            attempt_count = r.attempt_count + 1, claimed_by = p_claimed_by,
            claimed_at = v_now, locked_until = v_now + v_lock, updated_at = v_now,
            finished_at = NULL, response_code = NULL, response_body = NULL,
            expires_at = greatest(r.expires_at, v_expires)
        WHERE r.scope = p_scope AND r.key = p_key
        RETURNING * INTO v_row;
    END IF;

    RETURN ROW(
        v_kind,
        CASE WHEN v_kind IN ('new_claim', 'processing_stale', 'retryable_failure')
             THEN v_row.fence END,
        v_row.attempt_count, v_row.recovery_point, v_row.response_code, v_row.response_body,
        v_row.result_ref_type, v_row.result_ref_id,
        CASE WHEN v_kind <> 'processing_active' THEN v_row.failure_code END,
        CASE WHEN v_kind <> 'processing_active' THEN v_row.failure_message END,
        v_row.locked_until, v_row.expires_at)::ref.claim;
END;
$fn$;

-- Why an owner's write matched nothing: missing key, stale fence, or not owned.
CREATE FUNCTION ref.explain_refusal(p_scope text, p_key text, p_fence bigint,
                                    p_not_owned text, p_operation text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $fn$
DECLARE
    v_fence  bigint;
    v_status text;
BEGIN
    SELECT r.fence, r.status::text INTO v_fence, v_status
    FROM ref.idempotency_request r WHERE r.scope = p_scope AND r.key = p_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = p_not_owned,
            MESSAGE = format('%s: idempotency key does not exist', p_operation);
    ELSIF v_fence > p_fence THEN
        RAISE EXCEPTION USING ERRCODE = 'P4012',
            MESSAGE = format('%s: stale fence, a newer claim owns the idempotency key', p_operation);
    END IF;
    RAISE EXCEPTION USING ERRCODE = p_not_owned,
        MESSAGE = format('%s: idempotency key is not owned by this fence', p_operation),
        DETAIL = format('status %s', v_status);
END;
$fn$;

CREATE FUNCTION ref.mark_succeeded(
    p_scope text, p_key text, p_fence bigint, p_response_code integer,
    p_response_body jsonb DEFAULT NULL,
    p_result_ref_type text DEFAULT NULL,
    p_result_ref_id text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $fn$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    IF p_fence IS NULL OR p_response_code IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = 'fence and response_code are required';
    END IF;
    UPDATE ref.idempotency_request r
    SET status = 'succeeded', recovery_point = 'finished', response_code = p_response_code,
        response_body = p_response_body, result_ref_type = p_result_ref_type,
        result_ref_id = p_result_ref_id, failure_code = NULL, failure_message = NULL,
        locked_until = NULL, finished_at = v_now, updated_at = v_now
    WHERE r.scope = p_scope AND r.key = p_key AND r.fence = p_fence
      AND (r.status = 'processing'
           OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned'
               AND r.expires_at > v_now));
    IF NOT FOUND THEN
        PERFORM ref.explain_refusal(p_scope, p_key, p_fence, 'P4010', 'mark_succeeded');
    END IF;
END;
$fn$;

CREATE FUNCTION ref.mark_failed(
    p_scope text, p_key text, p_fence bigint, p_retryable boolean,
    p_failure_code text,
    p_failure_message text DEFAULT NULL,
    p_response_code integer DEFAULT NULL,
    p_response_body jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $fn$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    IF p_fence IS NULL OR p_retryable IS NULL OR p_failure_code IS NULL OR p_failure_code = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = 'fence, retryable and failure_code are required';
    END IF;
    UPDATE ref.idempotency_request r
    SET status = CASE WHEN p_retryable THEN 'failed_retryable'::idem.idempotency_status
                      ELSE 'failed_final'::idem.idempotency_status END,
        failure_code = p_failure_code, failure_message = p_failure_message,
        response_code = p_response_code, response_body = p_response_body,
        locked_until = NULL, finished_at = v_now, updated_at = v_now
    WHERE r.scope = p_scope AND r.key = p_key AND r.fence = p_fence
      AND (r.status = 'processing'
           OR (r.status = 'failed_retryable' AND r.failure_code = 'abandoned'
               AND r.expires_at > v_now));
    IF NOT FOUND THEN
        PERFORM ref.explain_refusal(p_scope, p_key, p_fence, 'P4011', 'mark_failed');
    END IF;
END;
$fn$;

-- The design's purge: pick the oldest expired outcomes, delete them by key.
CREATE FUNCTION ref.purge_expired(p_batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $fn$
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_deleted bigint;
BEGIN
    IF p_batch_limit IS NULL OR p_batch_limit <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = 'batch_limit must be positive';
    END IF;
    WITH doomed AS (
        SELECT d.scope, d.key
        FROM ref.idempotency_request d
        WHERE d.status <> 'processing' AND d.expires_at <= v_now
        ORDER BY d.expires_at
        LIMIT p_batch_limit
        FOR UPDATE SKIP LOCKED)
    DELETE FROM ref.idempotency_request r
    USING doomed
    WHERE r.scope = doomed.scope AND r.key = doomed.key;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    RETURN v_deleted;
END;
$fn$;
