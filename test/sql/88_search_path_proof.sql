-- The search_path proof (src/pg/statement_proof.cpp) refuses each construct
-- that would resolve a name through the caller's search_path, each for its
-- own reason, and proves texts that name everything with its schema.
-- idem.search_path_proof(statement) runs the proof the kept statements get
-- before they are prepared: its first refusal, or NULL when proven.

-- idem functions the proof must judge by their bodies: a LANGUAGE sql body
-- is inlined and analysed under the caller's path unless it is pinned or
-- parsed once (BEGIN ATOMIC).
CREATE FUNCTION idem.t88_unpinned() RETURNS integer LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION idem.t88_pinned() RETURNS integer LANGUAGE sql
    SET search_path = pg_catalog, pg_temp AS 'SELECT 1';
CREATE FUNCTION idem.t88_atomic() RETURNS integer LANGUAGE sql
BEGIN ATOMIC SELECT 1; END;
-- One overload unpinned is enough to refuse the name.
CREATE FUNCTION idem.t88_pinned(integer) RETURNS integer LANGUAGE sql AS 'SELECT $1';

-- Refused, each for its own reason.
SELECT n, idem.search_path_proof(t) AS refusal
  FROM (VALUES
    (1, $t$SELECT 1 FROM idempotency_request$t$),
    (2, $t$SELECT 1 FROM public.t88$t$),
    (3, $t$SELECT 1 FROM pg_temp.t88$t$),
    (4, $t$SELECT 'x'::text$t$),
    (5, $t$SELECT CAST(NULL AS public.t88_type)$t$),
    (6, $t$SELECT now()$t$),
    (7, $t$SELECT public.f88()$t$),
    (8, $t$SELECT pg_catalog.to_regclass('idem.fence_seq')$t$),
    (9, $t$SELECT 1 = 1$t$),
    (10, $t$SELECT 1 OPERATOR(public.=) 1$t$),
    (11, $t$SELECT 1 IN (1, 2)$t$),
    (12, $t$SELECT 'a' LIKE 'b'$t$),
    (13, $t$SELECT 1 BETWEEN 0 AND 2$t$),
    (14, $t$SELECT 1 IS DISTINCT FROM 2$t$),
    (15, $t$SELECT NULLIF(1, 2)$t$),
    (16, $t$SELECT 1 FROM idem.idempotency_request a JOIN idem.idempotency_request b USING (scope)$t$),
    (17, $t$SELECT 1 FROM idem.idempotency_request a NATURAL JOIN idem.idempotency_request b$t$),
    (18, $t$SELECT 'a' COLLATE "C"$t$),
    (19, $t$SELECT r.key FROM idem.idempotency_request r ORDER BY r.key USING <$t$),
    (20, $t$SELECT idem.t88_unpinned()$t$),
    (21, $t$SELECT idem.t88_pinned()$t$),
    (22, $t$SELECT idem.t88_no_such_function()$t$),
    (23, $t$SELECT pg_catalog.concat('idem.', 'fence_seq')::pg_catalog.regclass$t$),
    (24, $t$SELECT 'fence_seq'::pg_catalog.regclass$t$),
    (25, $t$SELECT $1::pg_catalog.regclass$t$),
    (26, $t$SELECT pg_catalog.nextval('idem.fence_seq')$t$),
    (27, $t$SELECT CASE 1 WHEN 1 THEN 2 END$t$),
    (28, $t$SELECT 1 OPERATOR(pg_catalog.=) ANY (SELECT 1) AND 1 = ANY (SELECT 1)$t$),
    (29, $t$SELECT 1 FROM idem.idempotency_request TABLESAMPLE system (1)$t$),
    (30, $t$WITH a AS (SELECT 1 FROM b), b AS (SELECT 1) SELECT 1 FROM a$t$),
    (31, $t$SELECT (WITH c AS (SELECT 1) SELECT 1 FROM c), (SELECT 1 FROM c)$t$),
    (32, $t$SELECT 1; SELECT now()$t$),
    (33, $t$UPDATE idem.idempotency_request SET status = 'failed' WHERE key = $1$t$)
  ) AS refused (n, t)
 ORDER BY n;

-- Proven: everything named with its schema (the grammar's own names,
-- INTEGER and the like, come out as pg_catalog's).
SELECT n, idem.search_path_proof(t) IS NULL AS proven, idem.search_path_proof(t) AS refusal
  FROM (VALUES
    (1, $t$SELECT r.key FROM idem.idempotency_request r WHERE r.scope OPERATOR(pg_catalog.=) $1 ORDER BY r.key USING OPERATOR(pg_catalog.<) FOR UPDATE OF r$t$),
    (2, $t$SELECT pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass), 1::integer, 'a' COLLATE pg_catalog."C"$t$),
    (3, $t$WITH RECURSIVE n AS (SELECT 1::integer AS i UNION ALL SELECT n.i OPERATOR(pg_catalog.+) 1 FROM n WHERE n.i OPERATOR(pg_catalog.<) 3) SELECT pg_catalog.string_agg(n.i::pg_catalog.text, ',') FROM n$t$),
    (4, $t$SELECT idem.t88_atomic(), idem.lookup('s', 'k')$t$),
    (5, $t$SELECT 1 FROM idem.idempotency_request a JOIN idem.idempotency_request b ON a.scope OPERATOR(pg_catalog.=) b.scope AND a.key OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])$t$)
  ) AS proven (n, t)
 ORDER BY n;

-- Dropping the unpinned overload leaves idem.t88_pinned proven.
DROP FUNCTION idem.t88_pinned(integer);
SELECT idem.search_path_proof($t$SELECT idem.t88_pinned()$t$) IS NULL AS proven;

-- A text the parser rejects is an error, not a verdict; a NULL text has none.
SELECT idem.search_path_proof('SELECT FROM WHERE');
SELECT idem.search_path_proof(NULL) IS NULL AS no_verdict;

-- It runs as its caller and only parses: not SECURITY DEFINER.
SELECT p.prosecdef, p.provolatile
  FROM pg_proc p
 WHERE p.oid = 'idem.search_path_proof(text)'::regprocedure;

DROP FUNCTION idem.t88_unpinned(), idem.t88_pinned(), idem.t88_atomic();
