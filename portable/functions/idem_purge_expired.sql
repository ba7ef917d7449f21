-- purge_expired (src/keys/maintenance.cpp): one bounded batch, oldest first,
-- never an in-flight row, skipping rows live transactions hold. The C++
-- engine deletes in place without first locking; here the statement the
-- C++ engine uses when the table has triggers (lock the batch, delete it by
-- ctid), which a cancel or statement_timeout ends like any statement. The
-- batch is taken from each relation idem.portable_local_relations gives
-- (the table, or this Citus node's shards of it) in turn, at most
-- batch_limit keys in all; the ctids a statement deletes are those it read
-- from the same relation.
LANGUAGE plpgsql
AS $function$
DECLARE
    deleted bigint := 0;
    gone bigint;
    now timestamptz;
    relation regclass;
BEGIN
    PERFORM idem.portable_require_batch_limit(batch_limit);
    PERFORM idem.portable_require_writable('idem.purge_expired()');
    now := pg_catalog.clock_timestamp();
    FOR relation IN SELECT * FROM idem.portable_local_relations('idem.idempotency_request'::pg_catalog.regclass) LOOP
        EXIT WHEN deleted >= batch_limit;
        EXECUTE pg_catalog.format(
            'WITH doomed AS (
                SELECT d.ctid AS tid FROM %1$s d
                 WHERE d.status <> ''processing'' AND d.expires_at <= $1
                 ORDER BY d.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             DELETE FROM %1$s r
              WHERE r.ctid = ANY (ARRAY(SELECT doomed.tid FROM doomed))', relation)
          USING now, batch_limit - deleted;
        GET DIAGNOSTICS gone = ROW_COUNT;
        deleted := deleted + gone;
    END LOOP;
    RETURN deleted;
END
$function$
