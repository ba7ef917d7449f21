-- What a client of the floor does around its plain statements, written as
-- SQL functions only so that the smoke check (bench/smoke.sql) can hold the
-- floor's statements to the same claim kinds as idem and the reference. The
-- benchmark itself never calls these: pgbench sends the statements in
-- bench/workloads/*_floor.sql directly. Each step below is one statement the
-- client would send; the branching between them is the client's code.

CREATE SCHEMA floor_client;

CREATE FUNCTION floor_client.claim_idempotency_key(
    p_scope text, p_key text, p_request_hash text,
    p_claimed_by text DEFAULT NULL,
    p_lock_timeout interval DEFAULT NULL,
    p_retention interval DEFAULT NULL)
RETURNS TABLE (kind text, fence bigint)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_lock      interval := coalesce(p_lock_timeout, interval '5 minutes');
    v_retention interval := coalesce(p_retention, interval '24 hours');
    v_fence     bigint;
    r           floor.idempotency_request%ROWTYPE;
BEGIN
    -- statement 1: claim
    INSERT INTO floor.idempotency_request (
        scope, key, request_hash, status, recovery_point, fence, attempt_count,
        claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at)
    VALUES (p_scope, p_key, p_request_hash, 'processing', 'started',
            nextval('floor.fence_seq'), 1, p_claimed_by, clock_timestamp(),
            clock_timestamp() + v_lock, clock_timestamp(), clock_timestamp(),
            clock_timestamp() + v_retention)
    ON CONFLICT (scope, key) DO NOTHING
    RETURNING floor.idempotency_request.fence INTO v_fence;
    IF v_fence IS NOT NULL THEN
        RETURN QUERY SELECT 'new_claim'::text, v_fence;
        RETURN;
    END IF;
    -- statement 2: read the row that was there
    SELECT * INTO r FROM floor.idempotency_request t
    WHERE t.scope = p_scope AND t.key = p_key;
    IF r.status <> 'processing' AND r.expires_at <= clock_timestamp() THEN
        -- statement 3a: an expired outcome starts afresh
        UPDATE floor.idempotency_request t
        SET request_hash = p_request_hash, status = 'processing', recovery_point = 'started',
            fence = nextval('floor.fence_seq'), attempt_count = 1, claimed_by = p_claimed_by,
            claimed_at = clock_timestamp(), locked_until = clock_timestamp() + v_lock,
            response_code = NULL, response_body = NULL, result_ref_type = NULL,
            result_ref_id = NULL, failure_code = NULL, failure_message = NULL,
            created_at = clock_timestamp(), updated_at = clock_timestamp(), finished_at = NULL,
            expires_at = clock_timestamp() + v_retention
        WHERE t.scope = p_scope AND t.key = p_key AND t.fence = r.fence
        RETURNING t.fence INTO v_fence;
        RETURN QUERY SELECT 'new_claim'::text, v_fence;
        RETURN;
    END IF;
    IF r.request_hash <> p_request_hash THEN
        RAISE EXCEPTION USING ERRCODE = 'P4002', MESSAGE = 'key reused for a different request';
    END IF;
    IF r.status = 'succeeded' THEN
        RETURN QUERY SELECT 'replay_success'::text, NULL::bigint;
    ELSIF r.status = 'failed_final' THEN
        RETURN QUERY SELECT 'final_failure'::text, NULL::bigint;
    ELSIF r.status = 'processing' AND r.locked_until > clock_timestamp() THEN
        RETURN QUERY SELECT 'processing_active'::text, NULL::bigint;
    ELSE
        -- statement 3b: take over a retryable failure or a stale lock
        UPDATE floor.idempotency_request t
        SET status = 'processing', fence = nextval('floor.fence_seq'),
            attempt_count = t.attempt_count + 1, claimed_by = p_claimed_by,
            claimed_at = clock_timestamp(), locked_until = clock_timestamp() + v_lock,
            updated_at = clock_timestamp(), finished_at = NULL, response_code = NULL,
            response_body = NULL
        WHERE t.scope = p_scope AND t.key = p_key AND t.fence = r.fence
        RETURNING t.fence INTO v_fence;
        RETURN QUERY SELECT CASE WHEN r.status = 'processing' THEN 'processing_stale'
                                 ELSE 'retryable_failure' END, v_fence;
    END IF;
END;
$fn$;

-- statement 4: record the outcome by primary key and fence; when it matches
-- nothing, the client reads the row to tell a stale fence from a lost key.
CREATE FUNCTION floor_client.complete(
    p_scope text, p_key text, p_fence bigint, p_status idem.idempotency_status,
    p_response_code integer, p_failure_code text)
RETURNS void
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_fence bigint;
BEGIN
    UPDATE floor.idempotency_request t
    SET status = p_status,
        recovery_point = CASE WHEN p_status = 'succeeded' THEN 'finished' ELSE t.recovery_point END,
        response_code = p_response_code, failure_code = p_failure_code,
        failure_message = NULL, locked_until = NULL,
        finished_at = clock_timestamp(), updated_at = clock_timestamp()
    WHERE t.scope = p_scope AND t.key = p_key AND t.fence = p_fence
      AND t.status = 'processing';
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT t.fence INTO v_fence FROM floor.idempotency_request t
    WHERE t.scope = p_scope AND t.key = p_key;
    IF v_fence > p_fence THEN
        RAISE EXCEPTION USING ERRCODE = 'P4012', MESSAGE = 'stale fence';
    END IF;
    RAISE EXCEPTION USING ERRCODE = CASE WHEN p_status = 'succeeded' THEN 'P4010' ELSE 'P4011' END,
        MESSAGE = 'not owned';
END;
$fn$;

CREATE FUNCTION floor_client.mark_succeeded(p_scope text, p_key text, p_fence bigint,
                                            p_response_code integer)
RETURNS void LANGUAGE sql
AS $fn$ SELECT floor_client.complete(p_scope, p_key, p_fence, 'succeeded', p_response_code, NULL) $fn$;

CREATE FUNCTION floor_client.mark_failed(p_scope text, p_key text, p_fence bigint,
                                         p_retryable boolean, p_failure_code text)
RETURNS void LANGUAGE sql
AS $fn$
SELECT floor_client.complete(p_scope, p_key, p_fence,
    CASE WHEN p_retryable THEN 'failed_retryable'::idem.idempotency_status
         ELSE 'failed_final'::idem.idempotency_status END, NULL, p_failure_code)
$fn$;

-- The floor's purge: one DELETE of the oldest expired outcomes.
CREATE FUNCTION floor_client.purge_expired(p_batch_limit integer)
RETURNS bigint
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_deleted bigint;
BEGIN
    DELETE FROM floor.idempotency_request t
    WHERE (t.scope, t.key) IN (
        SELECT d.scope, d.key FROM floor.idempotency_request d
        WHERE d.status <> 'processing' AND d.expires_at <= now()
        ORDER BY d.expires_at LIMIT p_batch_limit);
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    RETURN v_deleted;
END;
$fn$;
