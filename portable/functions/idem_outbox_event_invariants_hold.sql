-- The rules of an idem.outbox_event row (src/messages/message_invariants.cpp):
-- true, or {{sqlstate::check_violation}} naming the rule the row breaks. A NULL status skips the
-- lease and publication rules, as in C++ (NOT NULL refuses it first).
LANGUAGE plpgsql
AS $function$
BEGIN
    IF pg_catalog.char_length($1) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'new row violates idem invariant "outbox_scope_length"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'The scope is 1 to 255 characters long.',
                  HINT = 'idem.outbox_put refuses any other scope ({{sqlstate::scope_invalid}}).';
    END IF;
    IF pg_catalog.char_length($2) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'new row violates idem invariant "outbox_key_length"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'The key is 1 to 255 characters long.',
                  HINT = 'idem.outbox_put refuses any other key ({{sqlstate::key_invalid}}).';
    END IF;
    IF $3 = '' THEN
        RAISE EXCEPTION 'new row violates idem invariant "outbox_event_type_present"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'event_type is not empty.',
                  HINT = 'Name the event, for example ''order_paid''.';
    END IF;
    IF $4 IS NOT NULL THEN
        IF ($4 = 'leased') <> ($5 IS NOT NULL AND $6 IS NOT NULL) THEN
            RAISE EXCEPTION 'new row violates idem invariant "outbox_leased_has_lease"'
                USING ERRCODE = '{{sqlstate::check_violation}}',
                      DETAIL = 'An event is ''leased'' exactly when it has leased_until and lease_fence.',
                      HINT = 'Only idem.outbox_lease leases an event; publishing or failing it ends the lease.';
        END IF;
        IF ($4 = 'published') <> ($7 IS NOT NULL) THEN
            RAISE EXCEPTION 'new row violates idem invariant "outbox_published_is_dated"'
                USING ERRCODE = '{{sqlstate::check_violation}}',
                      DETAIL = 'An event is ''published'' exactly when it has published_at.',
                      HINT = 'Only idem.outbox_published publishes an event.';
        END IF;
    END IF;
    RETURN true;
END
$function$
