-- purge_expired (src/keys/maintenance.cpp): one bounded batch, oldest first,
-- never an in-flight row, skipping rows live transactions hold. The C++
-- engine deletes in place without first locking; here the statement the
-- C++ engine uses when the table has triggers (lock the batch, delete it by
-- ctid), which a cancel or statement_timeout ends like any statement.
LANGUAGE plpgsql
AS $function$
DECLARE
    deleted bigint;
    now timestamptz;
BEGIN
    PERFORM idem.portable_require_batch_limit(batch_limit);
    PERFORM idem.portable_require_writable('idem.purge_expired()');
    now := pg_catalog.clock_timestamp();
    WITH doomed AS (
        SELECT d.ctid AS tid FROM idem.idempotency_request d
         WHERE d.status <> 'processing' AND d.expires_at <= now
         ORDER BY d.expires_at LIMIT batch_limit FOR UPDATE SKIP LOCKED)
    DELETE FROM idem.idempotency_request r
     WHERE r.ctid = ANY (ARRAY(SELECT doomed.tid FROM doomed));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$function$
