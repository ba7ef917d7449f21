-- claim_or_wait (src/keys/claim_or_wait.cpp): claims as
-- claim_idempotency_key does and, while the answer is processing_active,
-- claims again until max_wait has passed. The portable engine has no
-- shared memory to be woken through at the owner's commit, so it polls:
-- 1 ms after the first attempt, doubling to at most 100 ms between
-- attempts, never sleeping past the deadline nor (by more than 1 ms) past
-- the owner's locked_until. pg_sleep is interruptible (a cancel or
-- statement_timeout ends the wait). Each attempt runs in a subtransaction
-- (a BEGIN ... EXCEPTION block) that is rolled back when it only found the
-- key in flight, so a takeover that lost its race leaves no row lock held
-- while the waiter sleeps. A transaction snapshot (REPEATABLE READ,
-- SERIALIZABLE) never sees the outcome it would wait for: one attempt,
-- answered at once.
LANGUAGE plpgsql
AS $function$
DECLARE
    policy record;
    bound bigint;
    started timestamptz;
    deadline timestamptz;
    answer idem.claim;
    poll_ms double precision := 1;
    sleep_ms double precision;
    now timestamptz;
    waited boolean := false;
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR request_hash IS NULL OR request_hash = ''
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_text(request_hash, '{{sqlstate::request_hash_invalid}}', 'request_hash', scope, key);
    END IF;
    -- The scope's owner (portable/support-owners.sql), before any key is read,
    -- and again before each later attempt: an owner changed while the call
    -- waits is seen (each statement of a READ COMMITTED wait reads anew).
    PERFORM idem.portable_check_scope_owner(scope);
    policy := idem.portable_claim_policy(scope, key, lock_timeout, retention);
    bound := CASE WHEN policy.bind THEN idem.portable_session_token() END;
    started := pg_catalog.clock_timestamp();
    deadline := idem.portable_require_positive_interval(max_wait, 'max_wait', started, scope, key,
        'Pass how long to wait for the key''s owner, such as ''10 seconds''.');
    IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        RETURN idem.portable_claim_once(scope, key, request_hash, claimed_by, policy.lock_timeout,
                                        policy.retention, policy.max_attempts, bound);
    END IF;
    LOOP
        IF waited THEN
            PERFORM idem.portable_check_scope_owner(scope);
        END IF;
        waited := true;
        BEGIN
            answer := idem.portable_claim_once(scope, key, request_hash, claimed_by,
                                               policy.lock_timeout, policy.retention,
                                               policy.max_attempts, bound);
            IF answer.kind = 'processing_active' THEN
                -- Undo whatever a lost takeover locked (PL/pgSQL variables
                -- survive the rollback, so the answer does). {{sqlstate::portable_rollback}} is raised
                -- and caught only here; any other error ends the call.
                RAISE EXCEPTION USING ERRCODE = '{{sqlstate::portable_rollback}}';
            END IF;
        EXCEPTION WHEN SQLSTATE '{{sqlstate::portable_rollback}}' THEN
            NULL;
        END;
        now := pg_catalog.clock_timestamp();
        EXIT WHEN answer.kind <> 'processing_active' OR now >= deadline;
        sleep_ms := LEAST(poll_ms, EXTRACT(EPOCH FROM deadline - now) * 1000);
        IF answer.locked_until IS NOT NULL THEN
            sleep_ms := LEAST(sleep_ms, GREATEST(EXTRACT(EPOCH FROM answer.locked_until - now) * 1000, 0) + 1);
        END IF;
        PERFORM pg_catalog.pg_sleep(sleep_ms / 1000.0);
        poll_ms := LEAST(poll_ms * 2, 100);
    END LOOP;
    RETURN answer;
END
$function$
