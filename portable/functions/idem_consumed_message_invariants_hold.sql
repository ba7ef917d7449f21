-- The rules of an idem.consumed_message row (src/messages/message_invariants.cpp):
-- true, or {{sqlstate::check_violation}} naming the rule the row breaks. NULL in a column means
-- NOT NULL already refused it, so a rule skips it.
LANGUAGE plpgsql
AS $function$
BEGIN
    IF pg_catalog.char_length($1) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'new row violates idem invariant "consumer_length"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'The consumer is 1 to 255 characters long.',
                  HINT = 'idem.consume_once refuses any other consumer ({{sqlstate::scope_invalid}}).';
    END IF;
    IF pg_catalog.char_length($2) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'new row violates idem invariant "message_id_length"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'The message_id is 1 to 255 characters long.',
                  HINT = 'idem.consume_once refuses any other message id ({{sqlstate::key_invalid}}).';
    END IF;
    IF $3 = '' THEN
        RAISE EXCEPTION 'new row violates idem invariant "message_hash_present"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'message_hash is not empty.',
                  HINT = 'Store the fingerprint the message was consumed with.';
    END IF;
    IF NOT ($5 > $4) THEN
        RAISE EXCEPTION 'new row violates idem invariant "expires_after_consumption"'
            USING ERRCODE = '{{sqlstate::check_violation}}', DETAIL = 'expires_at is later than consumed_at.',
                  HINT = 'A message kept forever has expires_at = ''infinity''.';
    END IF;
    RETURN true;
END
$function$
