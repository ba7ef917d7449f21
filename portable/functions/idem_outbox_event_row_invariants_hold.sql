-- The same rules over a whole row, as the table's CHECK passes it. PL/pgSQL
-- rather than SQL: the pinned search_path keeps a SQL function from being
-- inlined, and a SQL function's call costs more than PL/pgSQL's.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN idem.outbox_event_invariants_hold($1.scope, $1.key, $1.event_type, $1.status,
                                             $1.leased_until, $1.lease_fence, $1.published_at);
END
$function$
