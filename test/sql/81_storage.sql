-- The tables that turn over all their rows once a retention keep the pages
-- a vacuum empties (docs/operating.md, "Storage settings"): vacuum never
-- truncates them, so it never takes the ACCESS EXCLUSIVE lock that would
-- hold up every claim, and the table does not shrink only to grow back.
SELECT c.relname, c.reloptions
  FROM pg_class c
 WHERE c.relnamespace = 'idem'::regnamespace AND c.relkind = 'r' AND c.reloptions IS NOT NULL
 ORDER BY c.relname;

-- Messages written, then all deleted: the file keeps its size through a VACUUM.
SELECT count(idem.consume_once('storage81', g::text, 'h')) FROM generate_series(1, 5000) g;
CREATE TEMP TABLE size81 AS SELECT pg_relation_size('idem.consumed_message') AS before;
DELETE FROM idem.consumed_message WHERE consumer = 'storage81';
VACUUM idem.consumed_message;
SELECT pg_relation_size('idem.consumed_message') = before AS same_size, before > 0 AS had_pages FROM size81;
