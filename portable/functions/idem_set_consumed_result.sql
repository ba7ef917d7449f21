-- set_consumed_result (src/messages/inbox.cpp): {{sqlstate::key_not_found}} when the message has
-- no live row.
LANGUAGE plpgsql
AS $function$
BEGIN
    IF $1 IS NULL OR pg_catalog.char_length($1) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'consumer must be 1 to 255 characters'
            USING ERRCODE = '{{sqlstate::scope_invalid}}',
                  DETAIL = pg_catalog.format('consumer was %s.', idem.portable_msg_quoted($1, 40)),
                  HINT = 'Name the consumer (the scope of its message ids).';
    END IF;
    IF $2 IS NULL OR pg_catalog.char_length($2) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'message_id must be 1 to 255 characters'
            USING ERRCODE = '{{sqlstate::key_invalid}}',
                  DETAIL = pg_catalog.format('consumer %s, message_id %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2, 40)),
                  HINT = 'Pass the message''s own id, as the broker delivers it.';
    END IF;
    -- The consumer is the scope its owner check names.
    PERFORM idem.portable_check_scope_owner($1);
    UPDATE idem.consumed_message m
       SET result_ref_type = $3,
           result_ref_id = $4
     WHERE m.consumer = $1
       AND m.message_id = $2
       AND m.expires_at > pg_catalog.statement_timestamp();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'message % of consumer % is not consumed',
                        idem.portable_msg_quoted($2), idem.portable_msg_quoted($1)
            USING ERRCODE = '{{sqlstate::key_not_found}}',
                  DETAIL = pg_catalog.format('consumer %s, message_id %s: no live consumed message.',
                                             idem.portable_msg_quoted($1), idem.portable_msg_quoted($2)),
                  HINT = 'Call idem.consume_once first, in the same transaction.';
    END IF;
END
$function$
