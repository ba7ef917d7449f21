-- claim_idempotency_key (src/keys/claim.cpp): the arguments are checked in
-- the C++ engine's order (scope, key, request_hash, then the intervals,
-- resolved argument > scope policy > setting), then one claim
-- (idem.portable_claim_once, portable/support-keys.sql): a look without a
-- lock, and a write only when the key must change.
--
-- The common call (no interval argument, each idem.* setting unset or at its
-- default, the key's row absent) is done here in two statements and no
-- nested call: one read of the scope's policy together with whether the key
-- exists, then claim_once's INSERT ... ON CONFLICT DO NOTHING; a bound
-- claim (the policy's, or idem.bind_lock_to_session exactly 'on') too, with
-- its session's token. Every other case (a policy or setting to resolve,
-- the key present, a twin's insert first, a read-only transaction) goes the
-- general way, idem.portable_claim_policy then idem.portable_claim_once,
-- which gives the same answers and errors; when the policy resolved here,
-- claim_once gets it without a second read.
LANGUAGE plpgsql
AS $function$
DECLARE
    now timestamptz;
    present boolean;
    policy_lock interval;
    policy_retention interval;
    policy_forever boolean;
    policy_attempts integer;
    policy_bind boolean;
    bound bigint;
    answer_fence bigint;
    answer_locked timestamptz;
    answer_expires timestamptz;
    policy record;
BEGIN
    -- The checks' functions run only for a bad argument (they raise its error).
    IF scope IS NULL OR key IS NULL OR request_hash IS NULL OR request_hash = ''
       OR pg_catalog.char_length(scope) NOT BETWEEN 1 AND 255
       OR pg_catalog.char_length(key) NOT BETWEEN 1 AND 255 THEN
        PERFORM idem.portable_require_scope_and_key(scope, key);
        PERFORM idem.portable_require_text(request_hash, '{{sqlstate::request_hash_invalid}}', 'request_hash', scope, key);
    END IF;
    -- The scope's owner (portable/support-owners.sql), before any key is read.
    PERFORM idem.portable_check_scope_owner(scope);
    IF lock_timeout IS NULL AND retention IS NULL THEN
        SELECT sp.lock_timeout, sp.retention, sp.keep_forever, sp.max_attempts, sp.bind_lock_to_session,
               EXISTS (SELECT FROM idem.idempotency_request t
                        WHERE t.scope = claim_idempotency_key.scope AND t.key = claim_idempotency_key.key)
          INTO policy_lock, policy_retention, policy_forever, policy_attempts, policy_bind, present
          FROM (SELECT) AS one
          LEFT JOIN idem.scope_policy sp ON sp.scope = claim_idempotency_key.scope;
        -- What portable_claim_policy resolves, where no setting is read or
        -- each reads as its default (unset, or the text of the default the
        -- C++ engine's library registers where it is loaded beside this
        -- engine: '5min', '1d', 'off').
        IF (policy_lock IS NOT NULL
            OR coalesce(pg_catalog.current_setting('idem.lock_timeout', true), '') IN ('', '5min'))
           AND (policy_forever OR policy_retention IS NOT NULL
                OR coalesce(pg_catalog.current_setting('idem.retention', true), '') IN ('', '1d'))
           AND (policy_bind IS NOT NULL
                OR coalesce(pg_catalog.current_setting('idem.bind_lock_to_session', true), '')
                       IN ('', 'off', 'on')) THEN
            IF coalesce(policy_bind, pg_catalog.current_setting('idem.bind_lock_to_session', true) = 'on') THEN
                bound := idem.portable_session_token();
            END IF;
            policy_lock := coalesce(policy_lock, interval '5 minutes');
            policy_retention := CASE WHEN policy_forever THEN NULL
                                     ELSE coalesce(policy_retention, interval '1 day') END;
            IF NOT present AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
                now := pg_catalog.clock_timestamp();
                -- claim_once's INSERT (portable/support-keys.sql), the same row.
                INSERT INTO idem.idempotency_request AS t (
                    scope, key, request_hash, status, recovery_point, fence, attempt_count,
                    claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at,
                    bound_session)
                VALUES (
                    claim_idempotency_key.scope, claim_idempotency_key.key,
                    claim_idempotency_key.request_hash,
                    'processing', 'started', pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass), 1,
                    claim_idempotency_key.claimed_by, now, now + policy_lock, now, now,
                    CASE WHEN policy_retention IS NULL THEN 'infinity'::timestamptz
                         ELSE now + policy_retention END,
                    bound)
                ON CONFLICT ON CONSTRAINT idempotency_request_pkey DO NOTHING
                RETURNING t.fence, t.locked_until, t.expires_at
                     INTO answer_fence, answer_locked, answer_expires;
                IF FOUND THEN
                    RETURN ROW('new_claim', answer_fence, 1, 'started', NULL, NULL, NULL, NULL, NULL, NULL,
                               answer_locked, answer_expires)::idem.claim;
                END IF;
            END IF;
            -- A twin inserted first, or the key is there: the general claim.
            RETURN idem.portable_claim_once(scope, key, request_hash, claimed_by, policy_lock,
                                            policy_retention, coalesce(policy_attempts, 0), bound);
        END IF;
    END IF;
    policy := idem.portable_claim_policy(scope, key, lock_timeout, retention);
    RETURN idem.portable_claim_once(scope, key, request_hash, claimed_by,
                                    policy.lock_timeout, policy.retention, policy.max_attempts,
                                    CASE WHEN policy.bind THEN idem.portable_session_token() END);
END
$function$
