-- outbox_published (src/messages/outbox.cpp): {{sqlstate::stale_fence}}, with
-- idem.outbox_lease_lost's words, when the lease was lost. published_at is
-- the clock at the mark, not the statement's start, as in C++: a relay may
-- lease an aggregate's next event only after this mark committed, and the
-- times must say so. The event's scope is checked first, before its status
-- or fence is compared: a lease fence orders relays, it authorises nothing.
-- An id no event has is a lost lease, as for a member.
LANGUAGE plpgsql
AS $function$
DECLARE
    event_status text;
    event_scope text;
    state text;
    published timestamptz;
BEGIN
    SELECT e.scope INTO event_scope FROM idem.outbox_event e WHERE e.id = $1;
    IF FOUND THEN
        PERFORM idem.portable_check_scope_owner(event_scope);
    END IF;
    -- Read before the UPDATE: Citus refuses a VOLATILE function in its SET.
    published := pg_catalog.clock_timestamp();
    UPDATE idem.outbox_event e
       SET status = 'published'::idem.outbox_status,
           published_at = published,
           leased_until = NULL,
           lease_fence = NULL,
           last_error = NULL
     WHERE e.id = $1
       AND e.status = 'leased'::idem.outbox_status
       AND e.lease_fence = $2;
    IF FOUND THEN
        RETURN;
    END IF;
    -- The event's status, never its lease fence (as in C++).
    SELECT e.status::text INTO event_status
      FROM idem.outbox_event e
     WHERE e.id = $1;
    state := CASE WHEN NOT FOUND THEN 'no such event'
                  ELSE pg_catalog.format('status %s', event_status) END;
    RAISE EXCEPTION 'the lease on this outbox event was lost'
        USING ERRCODE = '{{sqlstate::stale_fence}}',
              DETAIL = pg_catalog.format('outbox_published(%s, %s): the event is not leased under this fence (%s).',
                                         COALESCE($1::text, ''), COALESCE($2::text, 'NULL'), state),
              HINT = 'Another relay leased the event after this lease ran out; drop the result, do not retry it.';
END
$function$
