-- The proxy database of a sharded idem (README.md, "Running idem beyond one
-- server"). Every shard is an ordinary database with idem; this database
-- holds no keys. PL/Proxy sends each call to the one shard that owns its
-- (scope, key) and runs there idem's function of the same name, with the
-- same arguments, returning its result: the application's SQL is the same
-- with one server or many.
--
-- Routing: partition = idem.shard_hash(scope, key) & (partitions - 1), where
-- idem.shard_hash(scope, key) = hashtext(scope || '/' || key) and the
-- partition count is a power of two (PL/Proxy's rule). The partitions are
-- the options p0 .. pN-1 of the SQL/MED server idem_shards, which the
-- deployment creates (connection strings are its business), e.g.
--
--   CREATE SERVER idem_shards FOREIGN DATA WRAPPER plproxy
--       OPTIONS (p0 'host=db0 dbname=app', p1 'host=db1 dbname=app', ...);
--   CREATE USER MAPPING FOR PUBLIC SERVER idem_shards;
--
-- Growing from 4 to 8 partitions moves, from each shard p, the keys whose
-- hash & 7 = p + 4 to a new shard: README.md says how.
CREATE EXTENSION IF NOT EXISTS plproxy;

CREATE SCHEMA idem;

-- idem.claim as the shards return it (kind travels as text).
CREATE TYPE idem.claim AS (
    kind            text,
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

-- The documented routing hash: a key, its phases and its business rows
-- land on the same shard whichever call carries them.
CREATE FUNCTION idem.shard_hash(scope text, key text)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.hashtext(scope OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) key) $$;

-- Makes a function of this database that runs the function of the same
-- name, arguments and result on the shard of its (scope, key): the routing
-- of idem's calls below, and of the application's own (orders_proxy.sql).
-- The signature must name its arguments scope and key.
CREATE FUNCTION idem.route_by_key(signature text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE pg_catalog.format('CREATE FUNCTION %s LANGUAGE plproxy AS %L', signature,
        E'CLUSTER ''idem_shards'';\nRUN ON idem.shard_hash(scope, key);');
END $$;

-- idem's calls that stand alone, as the shards declare them.
SELECT idem.route_by_key(signature) FROM (VALUES
    ('idem.claim_idempotency_key(scope text, key text, request_hash text,
        claimed_by text DEFAULT NULL, lock_timeout interval DEFAULT NULL,
        retention interval DEFAULT NULL) RETURNS idem.claim'),
    ('idem.claim_or_wait(scope text, key text, request_hash text, max_wait interval,
        claimed_by text DEFAULT NULL, lock_timeout interval DEFAULT NULL,
        retention interval DEFAULT NULL) RETURNS idem.claim'),
    ('idem.mark_succeeded(scope text, key text, fence bigint, response_code integer,
        response_body jsonb DEFAULT NULL, result_ref_type text DEFAULT NULL,
        result_ref_id text DEFAULT NULL) RETURNS void'),
    ('idem.mark_failed(scope text, key text, fence bigint, retryable boolean,
        failure_code text, failure_message text DEFAULT NULL,
        response_code integer DEFAULT NULL, response_body jsonb DEFAULT NULL) RETURNS void'),
    ('idem.extend_lock(scope text, key text, fence bigint, extend_by interval) RETURNS timestamptz'),
    -- A phase's checkpoint stands alone too (it commits on the key's shard).
    ('idem.set_recovery_point(scope text, key text, fence bigint, recovery_point text) RETURNS void')
) AS routed (signature);
