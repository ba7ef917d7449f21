-- outbox_lease (src/messages/outbox.cpp, statement outbox_lease of
-- src/pure/message_statements.def): the due events, leased. An event is
-- due when it is pending (or its lease ran out) and available, and no
-- earlier event of its aggregate is pending or leased; SKIP LOCKED, so two
-- relays never wait for, or get, the same event. The events are taken
-- from each relation idem.portable_local_relations gives (the table, or
-- this Citus node's shards of it: Citus refuses FOR UPDATE on the
-- distributed table) in turn, at most batch_limit in all; on Citus an
-- aggregate's order is therefore kept among the events one shard holds.
LANGUAGE plpgsql
AS $function$
DECLARE
    relation regclass;
    leased bigint := 0;
    got bigint;
    scope_filter text;
BEGIN
    IF $1 IS NULL OR $1 <= 0 THEN
        RAISE EXCEPTION 'batch_limit must be positive'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('batch_limit was %s.', COALESCE($1::text, 'NULL')),
                  HINT = 'Pass a positive number of rows.';
    END IF;
    -- A lease that is not positive on every calendar would be over when
    -- granted, and the next lease would take the same event.
    IF $2 IS NULL OR NOT idem.interval_is_positive($2) THEN
        RAISE EXCEPTION 'lease must be positive and finite'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('lease was %s.', COALESCE($2::text, 'NULL')),
                  HINT = 'Pass a lease longer than one delivery takes.';
    END IF;
    -- Only events of scopes the calling role may use, filtered before the
    -- LIMIT, and an aggregate's order kept among them
    -- (src/pure/message_statements.def, outbox_lease). A 1.1
    -- schema has no idem.may_use_scope and no owners: its statement has no
    -- filter (the C++ engine's outbox_lease_11).
    scope_filter := CASE WHEN pg_catalog.to_regprocedure('idem.may_use_scope(text)') IS NOT NULL
                         THEN 'AND idem.may_use_scope(%I.scope)' ELSE '' END;
    FOR relation IN SELECT * FROM idem.portable_local_relations('idem.outbox_event'::pg_catalog.regclass) LOOP
        EXIT WHEN leased >= $1;
        -- Columns are qualified throughout: the result's columns are
        -- PL/pgSQL variables of the same names.
        RETURN QUERY EXECUTE pg_catalog.format(
           'WITH due AS (
              SELECT e.id AS due_id
              FROM %1$s e
              WHERE e.status = ANY (''{pending,leased}''::idem.outbox_status[])
                AND (e.status = ''pending'' OR e.leased_until <= pg_catalog.statement_timestamp())
                AND e.available_at <= pg_catalog.statement_timestamp()
                AND ($3 IS NULL OR e.event_type = ANY ($3))
                %2$s
                AND NOT EXISTS (
                  SELECT
                  FROM %1$s p
                  WHERE e.aggregate_id IS NOT NULL
                    AND p.status = ANY (''{pending,leased}''::idem.outbox_status[])
                    AND p.aggregate_id IS NOT NULL
                    AND (p.aggregate_type = e.aggregate_type
                         OR p.aggregate_type IS NULL AND e.aggregate_type IS NULL)
                    AND p.aggregate_id = e.aggregate_id
                    AND p.id < e.id
                    %3$s)
              ORDER BY e.id
              LIMIT $1
              FOR UPDATE OF e SKIP LOCKED)
            UPDATE %1$s o
            SET status = ''leased''::idem.outbox_status,
                lease_fence = pg_catalog.nextval(''idem.outbox_lease_fence_seq''::pg_catalog.regclass),
                leased_until = pg_catalog.statement_timestamp() + $2,
                attempt_count = o.attempt_count + 1
            FROM due
            WHERE o.id = due.due_id
            RETURNING o.id, o.lease_fence, o.scope, o.key, o.event_type, o.aggregate_type,
                      o.aggregate_id, o.payload, o.headers, o.attempt_count, o.delivery_key',
            relation, pg_catalog.format(scope_filter, 'e'), pg_catalog.format(scope_filter, 'p'))
          USING $1 - leased, $2, $3;
        GET DIAGNOSTICS got = ROW_COUNT;
        leased := leased + got;
    END LOOP;
END
$function$
