-- idem 1.1 -> 1.2. The 1.2 base script (sql/idem--1.2.sql) is generated from
-- the 1.1 base script and this file by the Makefile, so the two ways to 1.2
-- build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== maintenance: one worker round in one call (DESIGN.md "Version 1.2") ====
-- What the worker does in a round, for servers without it (no preload, or
-- the portable engine, driven by pg_cron): sweep_stale, keys past
-- max_attempts, the completers, purge_expired, purge_consumed,
-- purge_published, each in batches of idem.batch_size and at most a fixed
-- number of batches per stage, so one call is bounded. It runs in the
-- caller's transaction; each completer runs as the role that owns it, in a
-- subtransaction of its own (docs/operating.md, "run_maintenance").
-- Returns the counts per stage (README, "run_maintenance").
CREATE FUNCTION idem.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_run_maintenance'
LANGUAGE C VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

-- An operator's call, like purge_expired.
REVOKE ALL ON FUNCTION idem.run_maintenance() FROM PUBLIC;
-- ==== end maintenance ====
