-- stats_counters: the C++ engine counts in shared memory, which the
-- portable engine does not have, and no table records these events. So one
-- row, this database's, with every counter and timestamp NULL: unknown,
-- never a made-up 0. One body for every header (1.1's twenty-nine columns and
-- 1.2's thirty-two, with failed_rounds): RETURN NEXT returns the OUT
-- parameters, which are NULL but for datid, a column every header has.
LANGUAGE plpgsql
AS $function$
BEGIN
    datid := (SELECT d.oid FROM pg_catalog.pg_database d
               WHERE d.datname = pg_catalog.current_database());
    RETURN NEXT;
END
$function$
