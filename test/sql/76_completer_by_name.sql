-- pg_upgrade carries idem's tables (docs/contract.md "Version 1.1"): no column of
-- any of its relations has a reg* type whose OIDs pg_upgrade cannot keep,
-- directly or inside a domain, an array, a composite or a range (the check
-- pg_upgrade makes, "Checking for reg* data types in user tables"). So a
-- scope's completer is stored by name: the policy trigger resolves what the
-- writer gave on the writer's search_path and stores the function's fully
-- qualified identity, which resolves to the same function under any
-- search_path.

-- Every type a column of one of idem's relations stores, unfolded.
WITH RECURSIVE idem_relations AS (
    SELECT d.objid AS relid
      FROM pg_depend d
      JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idem'
     WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'),
stored(relid, attname, typid, path) AS (
    SELECT a.attrelid, a.attname, a.atttypid, format_type(a.atttypid, NULL)
      FROM pg_attribute a
      JOIN idem_relations r ON r.relid = a.attrelid
      JOIN pg_class c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p', 'm', 'i', 't')
     WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT s.relid, s.attname, inner_type.typid, s.path || ' > ' || format_type(inner_type.typid, NULL)
      FROM stored s
      JOIN pg_type t ON t.oid = s.typid
      CROSS JOIN LATERAL (
          SELECT t.typbasetype WHERE t.typtype = 'd'           -- a domain's base
          UNION ALL SELECT t.typelem WHERE t.typcategory = 'A' AND t.typelem <> 0  -- an array's element
          UNION ALL SELECT a.atttypid FROM pg_attribute a      -- a composite's fields
                     WHERE t.typtype = 'c' AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
          UNION ALL SELECT rngsubtype FROM pg_range WHERE rngtypid = t.oid  -- a range's subtype
          UNION ALL SELECT rngtypid FROM pg_range WHERE rngmultitypid = t.oid) inner_type(typid)
     WHERE length(s.path) < 1000)
SELECT count(DISTINCT (relid, attname)) > 20 AS columns_seen,
       coalesce(string_agg(relid::regclass || '.' || attname || ': ' || path, E'\n')
                FILTER (WHERE typid IN ('regproc'::regtype, 'regprocedure'::regtype, 'regoper'::regtype,
                                        'regoperator'::regtype, 'regnamespace'::regtype, 'regconfig'::regtype,
                                        'regdictionary'::regtype, 'regcollation'::regtype)),
                'none') AS columns_pg_upgrade_refuses
  FROM stored;

SELECT format_type(atttypid, atttypmod) AS completer_type
  FROM pg_attribute WHERE attrelid = 'idem.scope_policy'::regclass AND attname = 'completer';

CREATE SCHEMA "Jobs";
CREATE FUNCTION "Jobs"."Finish Order"(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;
-- An overload with other arguments: a bare name picks the completer's.
CREATE FUNCTION "Jobs"."Finish Order"(scope text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;
CREATE FUNCTION "Jobs".only_wrong(scope text, key text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;

-- Each way a writer names a function, on its search_path; each is stored
-- as the same qualified identity.
SET search_path = "Jobs", public;
INSERT INTO idem.scope_policy (scope, completer) VALUES
    ('qualified', '"Jobs"."Finish Order"'),
    ('bare', '"Finish Order"'),
    ('signature', '"Finish Order"(text,text,bigint,text,integer)'),
    ('spelled', '"Jobs"."Finish Order"(text, pg_catalog.text, int8, "text", int4)');
INSERT INTO idem.scope_policy (scope, completer)
VALUES ('from_regprocedure', '"Finish Order"(text, text, bigint, text, integer)'::regprocedure);
UPDATE idem.scope_policy SET completer = '"Jobs"."Finish Order"' WHERE scope = 'qualified';
RESET search_path;
SELECT scope, completer FROM idem.scope_policy ORDER BY scope;

-- The stored name reads back as the same function whatever the reader's
-- search_path, even one that shadows text with a type of its own.
CREATE SCHEMA shadow;
CREATE DOMAIN shadow.text AS integer;
SET search_path = shadow, pg_catalog;
SELECT count(DISTINCT to_regprocedure(completer)) AS functions,
       min(to_regprocedure(completer)::oid) = '"Jobs"."Finish Order"(pg_catalog.text, pg_catalog.text, bigint, pg_catalog.text, integer)'::regprocedure::oid AS the_completer
  FROM idem.scope_policy;
RESET search_path;
-- Naming the same function in another spelling writes the same name.
UPDATE idem.scope_policy SET completer = completer;
SELECT count(DISTINCT completer) AS names FROM idem.scope_policy;
TRUNCATE idem.scope_policy;

-- What does not name a function is refused, with what was given.
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', 'no_such_function')$$) AS unknown_name;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', 'public.no_such(text, text, bigint, text, integer)')$$) AS unknown_signature;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', '"Finish Order"')$$) AS not_on_search_path;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', '"Jobs"."Finish Order"(no_such_type)')$$) ~ '^P4004: completer .* is not a function' AS unknown_type;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', 'f(text')$$) ~ '^P4004: completer .* is not a function' AS malformed;
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', '')$$) ~ '^P4004: completer .* is not a function' AS empty;
-- A name that finds a function with other arguments names it, to say why.
SELECT error_of($$INSERT INTO idem.scope_policy (scope, completer) VALUES ('x', '"Jobs".only_wrong')$$) AS wrong_signature;
SELECT count(*) AS policies FROM idem.scope_policy;

-- A completer renamed or dropped no longer resolves: the worker's round
-- finds no function and logs it instead of running something else.
INSERT INTO idem.scope_policy (scope, completer) VALUES ('renamed', '"Jobs"."Finish Order"');
ALTER FUNCTION "Jobs"."Finish Order"(text, text, bigint, text, integer) RENAME TO finish_order;
SELECT completer, to_regprocedure(completer) IS NULL AS unresolved FROM idem.scope_policy;
-- Changing another column of that row says so.
SELECT error_of($$UPDATE idem.scope_policy SET completer_delay = '1 minute'$$) AS stale_name;
UPDATE idem.scope_policy SET completer = '"Jobs".finish_order';
SELECT completer FROM idem.scope_policy;

TRUNCATE idem.scope_policy;
SET client_min_messages = warning;
DROP SCHEMA "Jobs", shadow CASCADE;
RESET client_min_messages;
