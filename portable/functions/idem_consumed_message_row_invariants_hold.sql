-- The same rules over a whole row, as the table's CHECK passes it.
LANGUAGE sql
AS $function$
SELECT idem.consumed_message_invariants_hold($1.consumer, $1.message_id, $1.message_hash,
                                             $1.consumed_at, $1.expires_at)
$function$
