-- idem.run_maintenance's rounds (portable/functions/idem_run_maintenance.sql):
-- the C++ engine's worker statements (src/pure/policy_statements.def) in
-- PL/pgSQL. Each runs as the extension's owner, called from the SECURITY
-- DEFINER body. The completers a round runs: support-completers.sql.

-- portable: version 1.1
-- The relations maintenance works on: the table itself, or on a Citus node
-- the shards of it that node holds (idem.local_relations, which 1.3 adds;
-- a schema without it has no Citus support, and so the table itself). The
-- coordinator holds no shard and so maintains nothing. A statement on a
-- shard names it, and reads and locks only that node's rows: Citus refuses
-- FOR UPDATE on the distributed table, and the shell table on a node is
-- empty.
CREATE FUNCTION idem.portable_local_relations(relation regclass)
RETURNS SETOF regclass
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regprocedure('idem.local_relations(regclass)') IS NULL THEN
        RETURN NEXT relation;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM idem.local_relations(relation);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_local_relations(regclass) FROM PUBLIC;

-- portable: version 1.2
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
-- would end them (the worker's exhaust_attempts), at most batch_limit keys
-- from the relations idem.portable_local_relations gives in turn. The
-- policies are read first and passed as arrays: on Citus idem.scope_policy
-- is a reference table, which a statement on a shard does not join.
CREATE FUNCTION idem.portable_exhaust_attempts(now timestamptz, batch_limit integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    scopes text[];
    limits integer[];
    relation regclass;
    ended bigint := 0;
    done_rows bigint;
BEGIN
    SELECT array_agg(q.scope), array_agg(q.max_attempts) INTO scopes, limits
      FROM idem.scope_policy q WHERE q.max_attempts IS NOT NULL;
    IF scopes IS NULL THEN
        RETURN 0;
    END IF;
    FOR relation IN SELECT * FROM idem.portable_local_relations('idem.idempotency_request'::regclass) LOOP
        EXIT WHEN ended >= batch_limit;
        EXECUTE format(
            'WITH done AS (
                SELECT s.ctid AS tid
                  FROM %1$s s
                  JOIN unnest($3::text[], $4::integer[]) AS p(scope, max_attempts) ON p.scope = s.scope
                 WHERE (s.status = ''processing'' AND s.locked_until <= $1
                        OR s.status = ''failed_retryable'' AND s.failure_code = ''abandoned'')
                   AND s.expires_at > $1
                   AND s.attempt_count >= p.max_attempts
                 LIMIT $2
                   FOR UPDATE OF s SKIP LOCKED)
             UPDATE %1$s AS r
                SET status = ''failed_final'',
                    failure_code = ''too_many_attempts'',
                    failure_message = ''the key reached its scope''''s max_attempts'',
                    locked_until = NULL,
                    finished_at = $1,
                    updated_at = $1
              WHERE r.ctid = ANY (ARRAY(SELECT done.tid FROM done))', relation)
          USING now, batch_limit - ended, scopes, limits;
        GET DIAGNOSTICS done_rows = ROW_COUNT;
        ended := ended + done_rows;
    END LOOP;
    RETURN ended;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_exhaust_attempts(timestamptz, integer) FROM PUBLIC;
