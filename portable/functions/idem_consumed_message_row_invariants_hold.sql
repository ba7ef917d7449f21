-- The same rules over a whole row, as the table's CHECK passes it. PL/pgSQL
-- rather than SQL: the pinned search_path keeps a SQL function from being
-- inlined, and a SQL function's call costs more than PL/pgSQL's.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN idem.consumed_message_invariants_hold($1.consumer, $1.message_id, $1.message_hash,
                                                 $1.consumed_at, $1.expires_at);
END
$function$
