-- For bench/lifecycle_instructions.sh (SHAPE=bench/shapes/scope_owners.sql,
-- PRELUDE='SET ROLE bench_app;'): the replays of WORKLOAD=replay made by a
-- role that is not a superuser, a member of the owner of the replayed scope
-- among 1,001 idem.scope_owner rows (bench/owner_overhead.sh's rows). With
-- PGOPTIONS='-c bench.owners=none' the same role and grants, and no row: what the check costs is
-- the difference.
CREATE ROLE bench_owner NOLOGIN;
CREATE ROLE bench_other NOLOGIN;
CREATE ROLE bench_app IN ROLE bench_owner;
GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval)
    TO bench_app;
INSERT INTO idem.scope_owner (scope_prefix, owner)
SELECT r.prefix, r.owner
  FROM (SELECT 'other_' || g || '/', 'bench_other'::regrole FROM generate_series(1, 1000) g
        UNION ALL SELECT 'replay', 'bench_owner'::regrole) r (prefix, owner)
 WHERE pg_catalog.current_setting('bench.owners', true) IS DISTINCT FROM 'none';
