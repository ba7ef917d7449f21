-- stats_counters: the C++ engine counts in shared memory, which the
-- portable engine does not have, and no table records these events. So one
-- row, this database's, with every counter and timestamp NULL: unknown,
-- never a made-up 0. One body for both headers (1.0's eighteen columns and
-- 1.1's twenty-nine): RETURN NEXT returns the OUT parameters, which are
-- NULL but for datid, a column both headers have.
LANGUAGE plpgsql
AS $function$
BEGIN
    datid := (SELECT d.oid FROM pg_catalog.pg_database d
               WHERE d.datname = pg_catalog.current_database());
    RETURN NEXT;
END
$function$
