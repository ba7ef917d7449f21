-- idem.run_maintenance's rounds (portable/functions/idem_run_maintenance.sql):
-- the C++ engine's worker statements (src/pure/policy_statements.def) in
-- PL/pgSQL. Each runs as the extension's owner, called from the SECURITY
-- DEFINER body. The completers a round runs: support-completers.sql.

-- idem.batch_size, as the C++ engine registers it (1 .. 1000000, default
-- 10000); without the library it is a plain custom setting, checked here.
CREATE FUNCTION idem.portable_batch_size()
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := current_setting('idem.batch_size', true);
BEGIN
    IF setting IS NULL OR setting = '' THEN
        RETURN 10000;
    END IF;
    IF setting !~ '^\s*[0-9]{1,7}\s*$' OR setting::integer NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'invalid value for parameter "idem.batch_size": "%"', setting
            USING ERRCODE = '22023', HINT = 'Value must be an integer between 1 and 1000000.';
    END IF;
    RETURN setting::integer;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_batch_size() FROM PUBLIC;

-- Abandoned keys past their scope's max_attempts end as the next claim
-- would end them (the worker's exhaust_attempts).
CREATE FUNCTION idem.portable_exhaust_attempts(now timestamptz, batch_limit integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended bigint;
BEGIN
    IF NOT EXISTS (SELECT FROM idem.scope_policy q WHERE q.max_attempts IS NOT NULL) THEN
        RETURN 0;
    END IF;
    WITH done AS (
        SELECT s.ctid AS tid
          FROM idem.idempotency_request s
          JOIN idem.scope_policy p ON p.scope = s.scope
         WHERE (s.status = 'processing' AND s.locked_until <= now
                OR s.status = 'failed_retryable' AND s.failure_code = 'abandoned')
           AND s.expires_at > now
           AND s.attempt_count >= p.max_attempts
         LIMIT batch_limit
           FOR UPDATE OF s SKIP LOCKED)
    UPDATE idem.idempotency_request AS r
       SET status = 'failed_final',
           failure_code = 'too_many_attempts',
           failure_message = 'the key reached its scope''s max_attempts',
           locked_until = NULL,
           finished_at = now,
           updated_at = now
     WHERE r.ctid = ANY (ARRAY(SELECT done.tid FROM done));
    GET DIAGNOSTICS ended = ROW_COUNT;
    RETURN ended;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_exhaust_attempts(timestamptz, integer) FROM PUBLIC;
