-- The key store's shared pieces for the portable engine's bodies
-- (portable/functions/idem_claim_*.sql, idem_mark_*.sql, ...). Each mirrors
-- one piece of the C++ engine, named in its comment, with the same texts.
-- Inserted after CREATE TYPE idem.claim: the table, the sequence and the
-- claim type exist; what the bodies name later (idem.scope_policy) is
-- resolved when they run. Called only from idem's own SECURITY DEFINER
-- bodies, so nothing here is granted to anyone.

-- A caller's text in a message: at most 300 characters, marked "..." when
-- cut (src/pg/message_text.hpp).
CREATE FUNCTION idem.portable_excerpt(value text)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN pg_catalog.char_length($1) > 300
              THEN pg_catalog.left($1, 300) || '...' ELSE $1 END
$$;
REVOKE ALL ON FUNCTION idem.portable_excerpt(text) FROM PUBLIC;

-- errdetail_key (src/base/arguments.cpp): 'scope "s", key "k"' with a
-- suffix after "; ", each name cut to 300 characters and marked "..."
-- when cut (src/pg/message_text.hpp).
CREATE FUNCTION idem.portable_key_detail(scope text, key text, suffix text DEFAULT NULL)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.concat_ws('; ',
           NULLIF(pg_catalog.concat_ws(', ',
             'scope "' || idem.portable_excerpt($1) || '"',
             'key "' || idem.portable_excerpt($2) || '"'), ''),
           $3)
$$;
REVOKE ALL ON FUNCTION idem.portable_key_detail(text, text, text) FROM PUBLIC;

-- require_scope_and_key (src/base/arguments.cpp).
CREATE FUNCTION idem.portable_require_scope_and_key(scope text, key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    scope_hint constant text := 'Pass the command domain the key belongs to, such as ''create_order''.';
    key_hint constant text := 'Send the request again with an Idempotency-Key header, such as a UUID.';
BEGIN
    IF scope IS NULL THEN
        RAISE EXCEPTION 'idempotency scope must not be NULL'
            USING ERRCODE = '{{sqlstate::scope_invalid}}', DETAIL = 'scope is NULL', HINT = scope_hint;
    END IF;
    IF pg_catalog.char_length(scope) = 0 THEN
        RAISE EXCEPTION 'idempotency scope must not be empty'
            USING ERRCODE = '{{sqlstate::scope_invalid}}', DETAIL = idem.portable_key_detail(scope, NULL), HINT = scope_hint;
    END IF;
    IF pg_catalog.char_length(scope) > 255 THEN
        RAISE EXCEPTION 'idempotency scope is longer than 255 characters'
            USING ERRCODE = '{{sqlstate::scope_invalid}}', DETAIL = idem.portable_key_detail(scope, NULL), HINT = scope_hint;
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION 'the Idempotency-Key is required'
            USING ERRCODE = '{{sqlstate::key_invalid}}', DETAIL = idem.portable_key_detail(scope, NULL, 'key is NULL'),
                  HINT = key_hint;
    END IF;
    IF pg_catalog.char_length(key) = 0 THEN
        RAISE EXCEPTION 'the Idempotency-Key must not be empty'
            USING ERRCODE = '{{sqlstate::key_invalid}}', DETAIL = idem.portable_key_detail(scope, key), HINT = key_hint;
    END IF;
    IF pg_catalog.char_length(key) > 255 THEN
        RAISE EXCEPTION 'the Idempotency-Key is longer than 255 characters'
            USING ERRCODE = '{{sqlstate::key_invalid}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Use a key of 1 to 255 characters, such as a UUID.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_scope_and_key(text, text) FROM PUBLIC;

-- require_text (src/base/arguments.cpp): "<what> must not be NULL|empty".
CREATE FUNCTION idem.portable_require_text(value text, sqlstate text, what text, scope text, key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR pg_catalog.octet_length(value) = 0 THEN
        RAISE EXCEPTION '% must not be %', what, CASE WHEN value IS NULL THEN 'NULL' ELSE 'empty' END
            USING ERRCODE = sqlstate, DETAIL = idem.portable_key_detail(scope, key),
                  HINT = pg_catalog.format('Pass a non-empty %s.', what);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_text(text, text, text, text, text) FROM PUBLIC;

-- require_fence (src/base/arguments.cpp).
CREATE FUNCTION idem.portable_require_fence(fence bigint, scope text, key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF fence IS NULL THEN
        RAISE EXCEPTION 'fence must not be NULL'
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Pass the fence returned by the claim that made you the owner.';
    END IF;
    IF fence <= 0 THEN
        RAISE EXCEPTION 'fence must be positive, not %', fence
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Pass the fence returned by the claim that made you the owner.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_fence(bigint, text, text) FROM PUBLIC;

-- require_bool (src/base/arguments.cpp).
CREATE FUNCTION idem.portable_require_bool(value boolean, what text, scope text, key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', what
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = pg_catalog.format('Pass true or false for %s.', what);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_bool(boolean, text, text, text) FROM PUBLIC;

-- optional_response_code (src/base/arguments.cpp).
CREATE FUNCTION idem.portable_check_response_code(code integer, required boolean, scope text, key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF code IS NULL THEN
        IF required THEN
            RAISE EXCEPTION 'response_code must not be NULL'
                USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                      HINT = 'Pass the HTTP status the request answered, such as 201.';
        END IF;
        RETURN;
    END IF;
    IF code < 100 OR code > 599 THEN
        RAISE EXCEPTION 'response_code % is not an HTTP status code', code
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Pass an HTTP status between 100 and 599.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_check_response_code(integer, boolean, text, text) FROM PUBLIC;

-- require_batch_limit (src/base/arguments.cpp).
CREATE FUNCTION idem.portable_require_batch_limit(batch_limit integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF batch_limit IS NULL THEN
        RAISE EXCEPTION 'batch_limit must not be NULL'
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = 'batch_limit is NULL',
                  HINT = 'Pass a positive number of rows, such as 10000.';
    END IF;
    IF batch_limit <= 0 THEN
        RAISE EXCEPTION 'batch_limit must be positive, not %', batch_limit
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = pg_catalog.format('batch_limit is %s', batch_limit),
                  HINT = 'Pass a positive number of rows, such as 10000.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_batch_limit(integer) FROM PUBLIC;

-- require_acceptable_interval (src/base/arguments.cpp) for a non-NULL
-- argument: "must be a finite interval", then "must be a positive
-- interval" with positive_hint (NULL: the hint naming the setting).
CREATE FUNCTION idem.portable_require_interval(value interval, what text, scope text, key text,
                                               positive_hint text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_catalog.isfinite(value) THEN
        RAISE EXCEPTION '% must be a finite interval', what
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = pg_catalog.format('Pass a positive %s such as ''30 seconds'', or NULL for the setting idem.%s%s.',
                                           what, what,
                                           CASE WHEN what = 'retention'
                                                THEN ' (idem.retention = -1 keeps keys forever)' ELSE '' END);
    END IF;
    IF NOT idem.interval_is_positive(value, false) THEN
        RAISE EXCEPTION '% must be a positive interval', what
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = coalesce(positive_hint,
                                  pg_catalog.format('Pass a positive %s such as ''30 seconds'', or NULL for the setting idem.%s.',
                                                    what, what));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_interval(interval, text, text, text, text) FROM PUBLIC;

-- require_positive_interval (src/base/arguments.cpp): a required interval
-- argument (max_wait, extend_by) that must also end after now.
CREATE FUNCTION idem.portable_require_positive_interval(value interval, what text, now timestamptz,
                                                        scope text, key text, hint text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', what
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key), HINT = hint;
    END IF;
    PERFORM idem.portable_require_interval(value, what, scope, key, hint);
    IF now + value <= now THEN
        RAISE EXCEPTION '% must be a positive interval', what
            USING ERRCODE = '{{sqlstate::bad_argument}}', DETAIL = idem.portable_key_detail(scope, key), HINT = hint;
    END IF;
    RETURN now + value;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_positive_interval(interval, text, timestamptz, text, text, text)
    FROM PUBLIC;

-- An integer setting with a unit (idem.lock_timeout in ms, idem.retention in
-- s; src/pg/settings.cpp). Without the library no GUC is registered, so the
-- value is read as the text it was set to and parsed as PostgreSQL parses
-- an integer setting with units ('30s', '5min', '1.5h', '300000'); a bad
-- value is refused with PostgreSQL's own words, here at use instead of at SET.
CREATE FUNCTION idem.portable_int_setting(name text, fallback integer, base_unit text,
                                          min_value integer, max_value integer)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := pg_catalog.current_setting(name, true);
    parts text[];
    unit_usecs numeric;
    base_usecs numeric := CASE base_unit WHEN 'ms' THEN 1000 ELSE 1000000 END;
    value numeric;
BEGIN
    IF raw IS NULL OR raw = '' THEN
        RETURN fallback;
    END IF;
    parts := pg_catalog.regexp_match(raw, '^\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*$');
    unit_usecs := CASE parts[2]
                      WHEN '' THEN base_usecs
                      WHEN 'us' THEN 1 WHEN 'ms' THEN 1000 WHEN 's' THEN 1000000
                      WHEN 'min' THEN 60000000 WHEN 'h' THEN 3600000000 WHEN 'd' THEN 86400000000 END;
    IF parts IS NULL THEN
        RAISE EXCEPTION 'invalid value for parameter "%": "%"', name, raw USING ERRCODE = '22023';
    END IF;
    IF unit_usecs IS NULL THEN
        RAISE EXCEPTION 'invalid value for parameter "%": "%"', name, raw
            USING ERRCODE = '22023',
                  HINT = 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".';
    END IF;
    value := pg_catalog.round(parts[1]::numeric * unit_usecs / base_usecs);
    IF value < min_value OR value > max_value THEN
        RAISE EXCEPTION '%', pg_catalog.format('%s%s is outside the valid range for parameter "%s" (%s .. %s)',
                                               value, ' ' || base_unit,
                                               name, min_value, max_value)
            USING ERRCODE = '22023';
    END IF;
    RETURN value::integer;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_int_setting(text, integer, text, integer, integer) FROM PUBLIC;

-- idem.bind_lock_to_session (src/pg/settings.cpp), off unless set.
CREATE FUNCTION idem.portable_bind_setting()
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := pg_catalog.current_setting('idem.bind_lock_to_session', true);
BEGIN
    IF raw IS NULL OR raw = '' THEN
        RETURN false;
    END IF;
    BEGIN
        RETURN pg_catalog.btrim(raw)::boolean;
    EXCEPTION WHEN invalid_text_representation THEN
        RAISE EXCEPTION 'parameter "idem.bind_lock_to_session" requires a Boolean value'
            USING ERRCODE = '22023';
    END;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_bind_setting() FROM PUBLIC;

-- What a claim uses (resolve_claim_policy, src/policy/scope_policy.cpp): an
-- argument, else the scope's idem.scope_policy row, else the setting. The
-- C++ engine keeps the policies in a per-backend cache; this engine reads
-- the row at every claim (one primary-key lookup), so a committed change
-- is in force at the next call. retention NULL: keys never expire.
CREATE FUNCTION idem.portable_claim_policy(
    scope text, key text, given_lock_timeout interval, given_retention interval,
    OUT lock_timeout interval, OUT retention interval, OUT max_attempts integer,
    OUT bind boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    retention_s integer;
BEGIN
    SELECT sp.lock_timeout, sp.retention, sp.keep_forever, sp.max_attempts, sp.bind_lock_to_session
      INTO p FROM idem.scope_policy sp WHERE sp.scope = portable_claim_policy.scope;
    IF given_lock_timeout IS NULL AND p.lock_timeout IS NOT NULL THEN
        lock_timeout := p.lock_timeout;
    ELSIF given_lock_timeout IS NULL AND coalesce(pg_catalog.current_setting('idem.lock_timeout', true), '') IN ('', '5min') THEN
        lock_timeout := interval '5 minutes';  -- the setting's default: unset, or as registered
    ELSIF given_lock_timeout IS NULL THEN
        lock_timeout := pg_catalog.make_interval(secs =>
            idem.portable_int_setting('idem.lock_timeout', 300000, 'ms', 1, 2147483647) / 1000.0);
    ELSE
        PERFORM idem.portable_require_interval(given_lock_timeout, 'lock_timeout', scope, key, NULL);
        lock_timeout := given_lock_timeout;
    END IF;
    IF given_retention IS NULL AND p.keep_forever THEN
        retention := NULL;
    ELSIF given_retention IS NULL AND p.retention IS NOT NULL THEN
        retention := p.retention;
    ELSIF given_retention IS NULL AND coalesce(pg_catalog.current_setting('idem.retention', true), '') IN ('', '1d') THEN
        retention := interval '1 day';  -- the setting's default: unset, or as registered
    ELSIF given_retention IS NULL THEN
        retention_s := idem.portable_int_setting('idem.retention', 86400, 's', -1, 2147483647);
        IF retention_s = 0 THEN
            RAISE EXCEPTION 'invalid value for parameter "idem.retention": 0'
                USING ERRCODE = '22023',
                      DETAIL = 'idem.retention must be positive, or -1 for keys that never expire.';
        END IF;
        retention := CASE WHEN retention_s < 0 THEN NULL
                          ELSE pg_catalog.make_interval(secs => retention_s) END;
    ELSE
        PERFORM idem.portable_require_interval(given_retention, 'retention', scope, key, NULL);
        retention := given_retention;
    END IF;
    max_attempts := coalesce(p.max_attempts, 0);
    bind := coalesce(p.bind_lock_to_session,
                     CASE WHEN coalesce(pg_catalog.current_setting('idem.bind_lock_to_session', true), '') IN ('', 'off')
                          THEN false ELSE idem.portable_bind_setting() END);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_claim_policy(text, text, interval, interval) FROM PUBLIC;

-- Sessions (idem.bind_lock_to_session; src/waits/session_binding.hpp). The
-- C++ engine's token is a bigint counted up from a server start's clock in
-- microseconds since 2000-01-01; this engine's token is the session's
-- backend_start in the same unit, so a session is named by a value from the
-- same range and neither engine ever takes a token of the other for one of
-- its live sessions: a key moved between engines (pg_dump, restore) whose
-- session is gone is stale at once, as it must be. Liveness is read from
-- pg_stat_activity, whose snapshot is cleared first so that a session that
-- ended during this transaction is seen gone (a claim_or_wait polls).
CREATE FUNCTION idem.portable_session_token_of(started timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT ((EXTRACT(EPOCH FROM $1) OPERATOR(pg_catalog.-) 946684800) OPERATOR(pg_catalog.*) 1000000)::bigint
$$;
REVOKE ALL ON FUNCTION idem.portable_session_token_of(timestamptz) FROM PUBLIC;

-- This session's backend_start, or NULL where pg_stat_activity hides it
-- from the extension's owner. Declared IMMUTABLE though it reads the
-- backend's status, so that the planner folds a call with no argument into
-- a constant of the calling statement's plan: portable_session_token's
-- plan, which PL/pgSQL keeps for the session, holds the value, and the
-- status array (every backend's entry, copied once per transaction, 130 kB
-- at max_connections 100) is read at the session's first bound claim
-- instead of at each. The value cannot change within a session, so a plan
-- made again (after an invalidation) folds the same one; the plan is the
-- backend's own, so nothing a caller can SET or create reaches it. It
-- never raises (NULL where hidden): the planner folds it wherever a
-- statement names it, even in a CASE arm that does not run.
CREATE FUNCTION idem.portable_backend_start()
RETURNS timestamptz
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT a.backend_start FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) a
$$;
REVOKE ALL ON FUNCTION idem.portable_backend_start() FROM PUBLIC;

-- This session's token. pg_stat_activity shows a session's backend_start
-- only to roles with the privileges of its user (or pg_read_all_stats): an
-- extension owner without them cannot bind, and is told so ({{sqlstate::not_preloaded}}, as the
-- C++ engine without its registry). A folded NULL (the owner could not see
-- the session when the plan was made) is read again, uncached, so that a
-- grant made since is honoured.
CREATE FUNCTION idem.portable_session_token()
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    started timestamptz := idem.portable_backend_start();
BEGIN
    IF started IS NULL THEN
        SELECT a.backend_start INTO started
          FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) a;
    END IF;
    IF started IS NULL THEN
        RAISE EXCEPTION 'idem.bind_lock_to_session needs to see this session in pg_stat_activity'
            USING ERRCODE = '{{sqlstate::not_preloaded}}',
                  DETAIL = 'The portable engine names a session by its backend_start, which pg_stat_activity hides from the extension''s owner.',
                  HINT = 'GRANT pg_read_all_stats TO the extension''s owner, or turn idem.bind_lock_to_session off.';
    END IF;
    RETURN idem.portable_session_token_of(started);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_session_token() FROM PUBLIC;

-- The tokens of the live sessions, and whether that list is complete: a
-- client session whose backend_start is hidden from the extension's owner
-- may hold any token, so then no bound key counts as ended early (its lock
-- still runs out as usual). On a hot standby every token counts as live.
CREATE FUNCTION idem.portable_live_sessions(OUT tokens bigint[], OUT complete boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    SELECT pg_catalog.array_agg(idem.portable_session_token_of(a.backend_start))
               FILTER (WHERE a.backend_start IS NOT NULL),
           NOT pg_catalog.pg_is_in_recovery()
               AND pg_catalog.bool_and(a.backend_start IS NOT NULL OR a.usesysid IS NULL)
      INTO tokens, complete
      FROM pg_catalog.pg_stat_get_activity(NULL) a;
    tokens := coalesce(tokens, '{}');
    complete := coalesce(complete, true);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_live_sessions() FROM PUBLIC;

CREATE FUNCTION idem.portable_session_alive(token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    live record;
BEGIN
    live := idem.portable_live_sessions();
    RETURN NOT live.complete OR token = ANY (live.tokens);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_session_alive(bigint) FROM PUBLIC;

-- The fence of a claim that takes an existing row over (a stale or failed
-- key, a new generation): above the row's fence, so a key's fences only
-- rise (fence_above, src/keys/fence.cpp, says the same). On one server
-- idem.fence_seq alone ensures it (its next value is above every fence it
-- issued). On Citus each node draws from its own sequence (INCREMENT BY
-- 2048, values congruent to the node's group id g: idem.citus_node_setup),
-- and a key whose shard moved from a node whose sequence ran ahead may hold
-- a fence above this node's next value. Then the fence "jumps": it comes
-- from the node's jump lane, idem.fence_jump_seq (values congruent to
-- g + 1024, which no ordinary claim draws), moved up to the first of its
-- values above the row's fence when its next one is not. Jumpers take
-- turns under idem.fence_jump_lock (no rows, no grants: nobody else can
-- take it), so the lane only rises. PL/pgSQL cannot release a lock before
-- its transaction ends, except by rolling back the subtransaction that
-- took it: the block raises {{sqlstate::portable_rollback}} and catches it; the sequence
-- calls in it are not transactional and stay, and so does the variable.
-- On one server (the lane steps by 1, unused) the same turn moves
-- idem.fence_seq up to the target only while its last value is still
-- below; an ordinary claim's nextval in the instant between that read and
-- the setval could draw a value issued again (docs/internals.md).
CREATE FUNCTION idem.portable_fence_above(old_fence bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fence bigint := pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass);
    step bigint;
    last bigint;
    called boolean;
BEGIN
    IF fence > old_fence THEN
        RETURN fence;
    END IF;
    BEGIN
        -- A database still at 1.2 (this body serves every version) has no
        -- lane and no lock: it jumps in idem.fence_seq as 1.2 did.
        IF pg_catalog.to_regclass('idem.fence_jump_lock') IS NOT NULL THEN
            LOCK TABLE idem.fence_jump_lock IN EXCLUSIVE MODE;
            SELECT s.seqincrement INTO step FROM pg_catalog.pg_sequence s
             WHERE s.seqrelid = 'idem.fence_jump_seq'::pg_catalog.regclass;
        END IF;
        IF step > 1 THEN
            fence := pg_catalog.nextval('idem.fence_jump_seq'::pg_catalog.regclass);
            IF fence <= old_fence THEN
                fence := fence + ((old_fence - fence) / step + 1) * step;
                PERFORM pg_catalog.setval('idem.fence_jump_seq'::pg_catalog.regclass, fence, true);
            END IF;
        ELSE
            SELECT GREATEST(s.seqincrement, 1) INTO step FROM pg_catalog.pg_sequence s
             WHERE s.seqrelid = 'idem.fence_seq'::pg_catalog.regclass;
            fence := fence + ((old_fence - fence) / step + 1) * step;
            SELECT q.last_value, q.is_called INTO last, called FROM idem.fence_seq q;
            IF called AND last >= fence THEN
                fence := pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass);
            ELSE
                PERFORM pg_catalog.setval('idem.fence_seq'::pg_catalog.regclass, fence, true);
            END IF;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '{{sqlstate::portable_rollback}}';
    EXCEPTION WHEN SQLSTATE '{{sqlstate::portable_rollback}}' THEN
        NULL;
    END;
    RETURN fence;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_fence_above(bigint) FROM PUBLIC;

-- One claim (claim_once, src/keys/claim.cpp): look at the row first, without
-- a lock (a replay takes no row lock and no transaction id, so it works in a
-- READ ONLY transaction), and write only what the observation calls for:
-- an absent key one INSERT ... ON CONFLICT DO NOTHING (never a
-- SELECT-then-INSERT race: a twin's insert makes it return nothing, after
-- waiting for that twin), a takeover or a new generation a compare-and-swap
-- on the fence and status observed. A write that matches nothing means
-- another claim changed the key: look again, at most 16 times.
-- Classification (src/pure/classify.cpp, docs/contract.md "What a claim answers"): a finished row past
-- expires_at is absent (a new generation, any hash); then a different
-- request hash is {{sqlstate::request_mismatch}}; then by status. bound: this session's token when
-- the claim binds its lock (NULL otherwise).
CREATE FUNCTION idem.portable_claim_once(
    scope text, key text, request_hash text, claimed_by text,
    lock_timeout interval, retention interval, max_attempts integer, bound bigint)
RETURNS idem.claim
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r idem.idempotency_request;
    now timestamptz;
    found_row boolean;
    looked boolean := true;
    action text := 'insert';
    kind idem.claim_kind;
    dead_session bigint;
    read_only boolean := pg_catalog.current_setting('transaction_read_only') = 'on';
    answer idem.claim;
    new_fence bigint;
    new_locked_until timestamptz;
    new_expiry timestamptz;
BEGIN
    now := pg_catalog.clock_timestamp();
    FOR step IN 1..16 LOOP
        IF looked THEN
            SELECT * INTO r FROM idem.idempotency_request t
             WHERE t.scope = portable_claim_once.scope AND t.key = portable_claim_once.key;
            found_row := FOUND;
            dead_session := NULL;
            IF NOT found_row THEN
                action := 'insert';
            ELSIF r.status <> 'processing' AND r.expires_at <= now THEN
                action := 'regenerate';
            ELSIF r.request_hash <> portable_claim_once.request_hash THEN
                RAISE EXCEPTION 'idempotency key was already used for a different request'
                    USING ERRCODE = '{{sqlstate::request_mismatch}}',
                          DETAIL = idem.portable_key_detail(scope, key, 'the stored request''s status is ' || r.status::text),
                          HINT = 'Use a new idempotency key for a new request; a retry must send exactly the same request.';
            ELSIF r.status = 'succeeded' THEN
                action := 'replay_success';
            ELSIF r.status = 'failed_final' THEN
                action := 'replay_failure';
            ELSIF r.status = 'failed_retryable' THEN
                action := 'take_over_failed';
            ELSIF r.locked_until <= now THEN
                action := 'take_over_stale';
            ELSIF r.bound_session IS NOT NULL AND NOT idem.portable_session_alive(r.bound_session) THEN
                action := 'take_over_stale';
                dead_session := r.bound_session;
            ELSE
                action := 'report_active';
            END IF;
            IF action IN ('replay_success', 'replay_failure', 'report_active') THEN
                kind := CASE action WHEN 'replay_success' THEN 'replay_success'
                                    WHEN 'replay_failure' THEN 'final_failure'
                                    ELSE 'processing_active' END;
                EXIT;
            END IF;
            IF read_only THEN
                RAISE EXCEPTION 'cannot claim this idempotency key in a read-only transaction'
                    USING ERRCODE = '{{sqlstate::read_only}}', DETAIL = idem.portable_key_detail(scope, key),
                          HINT = 'Only replays of finished keys work read-only; claiming a new, stale or failed key writes it, so use a read-write transaction on the primary.';
            END IF;
            IF action IN ('take_over_failed', 'take_over_stale')
               AND max_attempts > 0 AND r.attempt_count >= max_attempts THEN
                action := 'give_up';
            END IF;
            looked := false;
            CONTINUE;
        END IF;
        looked := true;
        -- What a claim that grants ownership writes, computed here and not
        -- in its statement: Citus refuses a VOLATILE function (nextval) in
        -- an UPDATE's SET and a non-IMMUTABLE one (timestamptz + interval)
        -- in a CASE there. A fence that takes a row over is above the
        -- row's (idem.portable_fence_above).
        IF action <> 'give_up' THEN
            IF action = 'insert' THEN
                new_fence := pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass);
            ELSE
                new_fence := idem.portable_fence_above(r.fence);
            END IF;
            IF new_locked_until IS NULL THEN
                new_locked_until := now + portable_claim_once.lock_timeout;
                new_expiry := CASE WHEN retention IS NULL THEN 'infinity'::timestamptz ELSE now + retention END;
            END IF;
        END IF;
        IF action = 'insert' THEN
            INSERT INTO idem.idempotency_request AS t (
                scope, key, request_hash, status, recovery_point, fence, attempt_count,
                claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at,
                bound_session)
            VALUES (
                portable_claim_once.scope, portable_claim_once.key, portable_claim_once.request_hash,
                'processing', 'started', new_fence, 1,
                portable_claim_once.claimed_by, now, new_locked_until, now, now, new_expiry, bound)
            ON CONFLICT ON CONSTRAINT idempotency_request_pkey DO NOTHING
            RETURNING t.* INTO r;
            IF FOUND THEN
                kind := 'new_claim';
                EXIT;
            END IF;
        ELSIF action = 'regenerate' THEN
            UPDATE idem.idempotency_request AS t
               SET request_hash = portable_claim_once.request_hash,
                   status = 'processing', recovery_point = 'started',
                   fence = new_fence,
                   attempt_count = 1, claimed_by = portable_claim_once.claimed_by,
                   claimed_at = now, locked_until = new_locked_until,
                   response_code = NULL, response_body = NULL, result_ref_type = NULL,
                   result_ref_id = NULL, failure_code = NULL, failure_message = NULL,
                   created_at = now, updated_at = now, finished_at = NULL,
                   bound_session = bound,
                   expires_at = new_expiry
             WHERE t.scope = portable_claim_once.scope AND t.key = portable_claim_once.key
               AND t.fence = r.fence AND t.status <> 'processing' AND t.expires_at <= now
            RETURNING t.* INTO r;
            IF FOUND THEN
                kind := 'new_claim';
                EXIT;
            END IF;
        ELSIF action = 'give_up' THEN
            UPDATE idem.idempotency_request AS t
               SET status = 'failed_final', failure_code = 'too_many_attempts',
                   failure_message = 'the key reached its scope''s max_attempts',
                   locked_until = NULL, bound_session = NULL, finished_at = now, updated_at = now
             WHERE t.scope = portable_claim_once.scope AND t.key = portable_claim_once.key
               AND t.fence = r.fence AND t.status = r.status
               AND t.request_hash = portable_claim_once.request_hash
               AND (t.status = 'failed_retryable' AND t.expires_at > now
                    OR t.status = 'processing'
                       AND (t.locked_until <= now OR t.bound_session = dead_session))
            RETURNING t.* INTO r;
            IF FOUND THEN
                kind := 'final_failure';
                EXIT;
            END IF;
        ELSE
            UPDATE idem.idempotency_request AS t
               SET status = 'processing',
                   fence = new_fence,
                   attempt_count = t.attempt_count + 1,
                   claimed_by = portable_claim_once.claimed_by, claimed_at = now,
                   locked_until = new_locked_until, updated_at = now,
                   finished_at = NULL, response_code = NULL, response_body = NULL,
                   bound_session = bound,
                   expires_at = GREATEST(t.expires_at, new_expiry)
             WHERE t.scope = portable_claim_once.scope AND t.key = portable_claim_once.key
               AND t.fence = r.fence AND t.status = r.status
               AND t.request_hash = portable_claim_once.request_hash
               AND (t.status = 'failed_retryable' AND t.expires_at > now
                    OR t.status = 'processing'
                       AND (t.locked_until <= now OR t.bound_session = dead_session))
            RETURNING t.* INTO r;
            IF FOUND THEN
                kind := CASE action WHEN 'take_over_failed' THEN 'retryable_failure'
                                    ELSE 'processing_stale' END;
                EXIT;
            END IF;
        END IF;
        -- Lost a race: look again, under the same clock (as the C++ claim).
    END LOOP;
    IF kind IS NULL THEN
        RAISE EXCEPTION 'could not claim the idempotency key: it kept changing under contention'
            USING ERRCODE = '{{sqlstate::contention}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Retry the request; the key is being claimed by many requests at once.';
    END IF;
    -- form_claim: the fence only for a kind that grants ownership; a twin
    -- still at work reports its lock, not the failure it is retrying.
    answer := ROW(kind,
                  CASE WHEN kind IN ('new_claim', 'processing_stale', 'retryable_failure') THEN r.fence END,
                  r.attempt_count, r.recovery_point, r.response_code, r.response_body,
                  r.result_ref_type, r.result_ref_id,
                  CASE WHEN kind <> 'processing_active' THEN r.failure_code END,
                  CASE WHEN kind <> 'processing_active' THEN r.failure_message END,
                  r.locked_until, r.expires_at)::idem.claim;
    RETURN answer;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_claim_once(text, text, text, text, interval, interval, integer, bigint)
    FROM PUBLIC;

-- An owner's write matched no row (explain_refusal, src/keys/outcome.cpp):
-- missing, a stale fence ({{sqlstate::stale_fence}}), or not owned by this fence. The detail
-- names the caller's fence, never the key's.
CREATE FUNCTION idem.portable_explain_refusal(scope text, key text, fence bigint,
                                              not_owned_sqlstate text, operation text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    current_fence bigint;
    current_status text;
BEGIN
    SELECT r.fence, r.status::text INTO current_fence, current_status
      FROM idem.idempotency_request r
     WHERE r.scope = portable_explain_refusal.scope AND r.key = portable_explain_refusal.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: idempotency key does not exist', operation
            USING ERRCODE = not_owned_sqlstate, DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Claim the key with idem.claim_idempotency_key first; it may have expired and been purged.';
    END IF;
    IF current_fence > fence THEN
        RAISE EXCEPTION '%: stale fence, a newer claim owns the idempotency key', operation
            USING ERRCODE = '{{sqlstate::stale_fence}}',
                  DETAIL = idem.portable_key_detail(scope, key,
                               pg_catalog.format('your fence %s is older than the key''s', fence)),
                  HINT = 'Your lock expired and another request took the key over; stop working on it and do not record an outcome.';
    END IF;
    RAISE EXCEPTION '%: idempotency key is not owned by this fence', operation
        USING ERRCODE = not_owned_sqlstate,
              DETAIL = idem.portable_key_detail(scope, key,
                           pg_catalog.format('status %s, your fence %s', current_status, fence)),
              HINT = 'Only the owner of a processing key (or of one swept as abandoned) may write it; claim the key first.';
END
$$;
REVOKE ALL ON FUNCTION idem.portable_explain_refusal(text, text, bigint, text, text) FROM PUBLIC;

-- One LOG line per use of a by-key tool (log_tool_use, src/keys/key_tools.cpp).
CREATE FUNCTION idem.portable_log_tool_use(tool text, scope text, key text, what text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The role in effect where the call was made: SET ROLE's, else the
    -- session user (SECURITY DEFINER makes current_user the owner here).
    RAISE LOG 'idem.% by session user "%", role "%", application "%": scope "%", key "%": %',
        tool, session_user,
        CASE WHEN pg_catalog.current_setting('role') = 'none' THEN session_user::text
             ELSE pg_catalog.current_setting('role') END,
        pg_catalog.current_setting('application_name'),
        idem.portable_excerpt(scope), idem.portable_excerpt(key), what;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_log_tool_use(text, text, text, text) FROM PUBLIC;

-- A by-key tool's statement matched no row (refuse, src/keys/key_tools.cpp):
-- the key is missing ({{sqlstate::key_not_found}}), in flight without force ({{sqlstate::key_in_flight}}), or changed
-- meanwhile ({{sqlstate::contention}}). Logs the refusal, then raises it.
CREATE FUNCTION idem.portable_refuse_tool(tool text, scope text, key text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    current_fence bigint;
    current_status text;
    observed text;
BEGIN
    SELECT r.fence, r.status::text INTO current_fence, current_status
      FROM idem.idempotency_request r
     WHERE r.scope = portable_refuse_tool.scope AND r.key = portable_refuse_tool.key;
    IF NOT FOUND THEN
        PERFORM idem.portable_log_tool_use(tool, scope, key, 'refused: no such key');
        RAISE EXCEPTION 'idem.%: idempotency key does not exist', tool
            USING ERRCODE = '{{sqlstate::key_not_found}}', DETAIL = idem.portable_key_detail(scope, key),
                  HINT = 'Check the scope and key with idem.lookup; an expired key may already have been purged.';
    END IF;
    observed := pg_catalog.format('status %s, fence %s', current_status, current_fence);
    IF current_status <> 'processing' THEN
        PERFORM idem.portable_log_tool_use(tool, scope, key,
            pg_catalog.format('refused: the key changed meanwhile (%s)', observed));
        RAISE EXCEPTION 'idem.%: the idempotency key changed while being handled', tool
            USING ERRCODE = '{{sqlstate::contention}}', DETAIL = idem.portable_key_detail(scope, key, observed),
                  HINT = 'Run the call again.';
    END IF;
    PERFORM idem.portable_log_tool_use(tool, scope, key,
        pg_catalog.format('refused: the key is in flight (%s)', observed));
    RAISE EXCEPTION 'idem.%: idempotency key is being processed', tool
        USING ERRCODE = '{{sqlstate::key_in_flight}}', DETAIL = idem.portable_key_detail(scope, key, observed),
              HINT = 'Its owner may still be working and would lose its outcome. Wait for it (idem.lookup shows locked_until), or pass force => true to end it anyway.';
END
$$;
REVOKE ALL ON FUNCTION idem.portable_refuse_tool(text, text, text) FROM PUBLIC;

-- Maintenance writes; where the transaction may not write it refuses with
-- 25006 before anything runs, naming the function (require_writable,
-- src/keys/maintenance.cpp).
CREATE FUNCTION idem.portable_require_writable(what text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute % in a read-only transaction', what USING ERRCODE = '25006';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_writable(text) FROM PUBLIC;

-- idem.typical_duration's estimate (portable/functions/idem_typical_duration.sql
-- says how it is computed). SECURITY DEFINER, since the C++ function reads
-- shared memory and so needs no right on the key table: a role granted
-- EXECUTE on idem.typical_duration alone gets its answer. Executable by
-- PUBLIC for that reason, so it checks the right itself: the session's
-- user, or the role it SET ROLE to, must hold EXECUTE on
-- idem.typical_duration or on idem.retry_after, the SECURITY DEFINER
-- function that calls it and answers from the same estimate (42501
-- otherwise, as PostgreSQL would answer).
CREATE FUNCTION idem.portable_may_know_durations(role text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.has_function_privilege($1, 'idem.typical_duration(text)', 'EXECUTE')
      OR pg_catalog.has_function_privilege($1, 'idem.retry_after(text, idem.claim)', 'EXECUTE')
$$;
REVOKE ALL ON FUNCTION idem.portable_may_know_durations(text) FROM PUBLIC;

CREATE FUNCTION idem.portable_typical_duration(scope text)
RETURNS interval
LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sample bigint;
    mean bigint;
BEGIN
    IF NOT (idem.portable_may_know_durations(session_user)
            OR pg_catalog.current_setting('role') <> 'none'
               AND idem.portable_may_know_durations(pg_catalog.current_setting('role'))) THEN
        RAISE EXCEPTION 'permission denied for function typical_duration' USING ERRCODE = '42501';
    END IF;
    FOR sample IN
        SELECT recent.took FROM (
            SELECT r.finished_at,
                   (EXTRACT(EPOCH FROM r.finished_at - r.claimed_at) * 1000000)::bigint AS took
              FROM idem.idempotency_request r
             WHERE r.scope = portable_typical_duration.scope
               AND r.status <> 'processing'
               AND r.finished_at IS NOT NULL
               AND r.failure_message IS DISTINCT FROM 'the owner recorded no outcome before its lock expired'
               AND r.failure_message IS DISTINCT FROM 'expired by idem.force_expire before its owner recorded an outcome'
               AND r.failure_message IS DISTINCT FROM 'the key reached its scope''s max_attempts'
             ORDER BY r.finished_at DESC
             LIMIT 64) recent
         ORDER BY recent.finished_at
    LOOP
        sample := GREATEST(sample, 0);
        mean := CASE WHEN mean IS NULL THEN sample ELSE mean + (sample - mean) / 8 END;
    END LOOP;
    RETURN pg_catalog.make_interval(secs => mean / 1000000.0);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_typical_duration(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem.portable_typical_duration(text) TO PUBLIC;
