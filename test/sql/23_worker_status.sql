-- The worker's SQL surface, on the shared test cluster (idem preloaded,
-- idem.database left at its default 'postgres'). What the worker does is
-- proven by the Perl TAP tests in test/t/03*_worker_*.pl.
SELECT name, setting, unit, context, vartype, min_val, max_val
  FROM pg_settings
 WHERE name IN ('idem.database', 'idem.naptime', 'idem.batch_size', 'idem.worker_enabled')
 ORDER BY name;

-- One row per configured database, in a state from the documented list.
SELECT database,
       state IN ('stopped', 'starting', 'waiting for database', 'waiting for extension',
                 'standby', 'binary upgrade', 'disabled', 'idle', 'working', 'failing') AS known_state
  FROM idem.worker_status;
SELECT count(*) AS rows_from_function FROM idem.worker_status();

-- The view's columns and types.
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid = 'idem.worker_status'::regclass AND attnum > 0
 ORDER BY attnum;

-- Server-wide settings: not for one session; bounds checked like any
-- setting's (invalid values only, so nothing is written to the cluster).
SELECT error_of($$SET idem.naptime = '5s'$$);
ALTER SYSTEM SET idem.naptime = 0;
ALTER SYSTEM SET idem.batch_size = 1000001;
ALTER SYSTEM SET idem.database = '';
ALTER SYSTEM SET idem.database = 'a, b, a';

-- Nothing is granted to PUBLIC.
CREATE ROLE idem_watcher LOGIN;
SET ROLE idem_watcher;
SELECT error_of($$SELECT * FROM idem.worker_status$$);
SELECT error_of($$SELECT * FROM idem.worker_status()$$);
RESET ROLE;
-- Monitoring roles may read it, as they may read idem.stats.
GRANT pg_monitor TO idem_watcher;
SET ROLE idem_watcher;
SELECT count(*) > 0 AS can_watch FROM idem.worker_status;
RESET ROLE;
DROP OWNED BY idem_watcher;
DROP ROLE idem_watcher;
