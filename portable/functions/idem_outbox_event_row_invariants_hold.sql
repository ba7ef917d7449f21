-- The same rules over a whole row, as the table's CHECK passes it.
LANGUAGE sql
AS $function$
SELECT idem.outbox_event_invariants_hold($1.scope, $1.key, $1.event_type, $1.status,
                                         $1.leased_until, $1.lease_fence, $1.published_at)
$function$
