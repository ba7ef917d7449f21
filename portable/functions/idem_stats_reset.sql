-- stats_reset: the portable engine keeps no counters (idem.stats_counters
-- reports them NULL), so there is nothing to reset; the argument is still
-- checked as the C++ engine checks it.
LANGUAGE plpgsql
AS $function$
BEGIN
    IF all_databases IS NULL THEN
        RAISE EXCEPTION 'all_databases must not be NULL'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  HINT = 'Pass false to reset this database''s counters, true to reset every database''s.';
    END IF;
END
$function$
