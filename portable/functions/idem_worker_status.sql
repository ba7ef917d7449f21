-- worker_status: the portable engine has no background worker (maintenance
-- runs through idem.run_maintenance(), scheduled with pg_cron), so no
-- database has a worker to report: no rows.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN;
END
$function$
