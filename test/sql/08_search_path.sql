-- A hostile schema first in search_path, with a same-named table, functions
-- and a text = text operator that says everything is equal: idem must not
-- notice it.
CREATE SCHEMA hostile;
CREATE TABLE hostile.idempotency_request (LIKE idem.idempotency_request);
CREATE FUNCTION hostile.texteq_always(text, text) RETURNS boolean
  LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR hostile.= (LEFTARG = text, RIGHTARG = text, PROCEDURE = hostile.texteq_always);
CREATE FUNCTION hostile.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$;
CREATE FUNCTION hostile.greatest(timestamptz, timestamptz) RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$;
CREATE OPERATOR hostile.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, PROCEDURE = pg_catalog.timestamptz_gt);

SET search_path = hostile, pg_catalog, public;
-- The hostile operator is really in effect for unqualified SQL:
SELECT 'a'::text = 'b'::text AS hostile_equality;

SELECT kind, fence > 1 AS real_fence FROM idem.claim_idempotency_key('sp', 'k1', 'h1');
SELECT kind FROM idem.claim_idempotency_key('sp', 'k2', 'h2');
SELECT kind FROM idem.claim_idempotency_key('sp', 'k1', 'h1');
SELECT error_of($$SELECT idem.claim_idempotency_key('sp', 'k1', 'different')$$) LIKE 'P4002:%' AS mismatch_detected;
SELECT f.fence AS f FROM idem.idempotency_request f WHERE f.scope OPERATOR(pg_catalog.=) 'sp' AND f.key OPERATOR(pg_catalog.=) 'k1' \gset
SELECT idem.set_recovery_point('sp', 'k1', :f, 'step');
SELECT idem.mark_succeeded('sp', 'k1', :f, 200);
SELECT kind, response_code FROM idem.claim_idempotency_key('sp', 'k1', 'h1');
SELECT kind FROM idem.claim_idempotency_key('sp', 'k2', 'h2');
SELECT idem.sweep_stale() AS swept_nothing, idem.purge_expired() AS purged_nothing;
SELECT count(*) AS hostile_rows FROM hostile.idempotency_request;
RESET search_path;
SELECT scope, key, status, recovery_point FROM idem.idempotency_request WHERE scope = 'sp' ORDER BY key;
DROP SCHEMA hostile CASCADE;
