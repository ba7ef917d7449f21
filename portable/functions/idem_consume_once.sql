-- consume_once (src/messages/inbox.cpp): look first, through the primary key
-- (a replay is that read and nothing else: no lock, no transaction id, no
-- WAL); only a message with no live row goes to the INSERT ... ON CONFLICT,
-- which waits for a twin's in-flight insert. When the twin commits, the
-- insert returns nothing and the loop looks again, now seeing the twin's
-- row (a replay, false); when it rolls back, the insert goes in (true). An
-- expired row is renewed in place, as if the purger had deleted it. Each
-- statement of a volatile PL/pgSQL function sees the transaction's earlier
-- writes and takes a new snapshot under READ COMMITTED, as the C++ probe
-- does. The retention of a new message: the argument, else the consumer's
-- scope policy (read from idem.scope_policy at each new message: the C++
-- engine keeps it in a per-backend cache), else idem.inbox_retention (a bad
-- value of which is refused here, at the first new message; the library
-- refuses it at SET).
LANGUAGE plpgsql
AS $function$
DECLARE
    clock timestamptz := pg_catalog.statement_timestamp();
    expiry timestamptz;
    stored_hash text;
    stored_expiry timestamptz;
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
    IF $3 IS NULL OR $3 = '' THEN
        RAISE EXCEPTION 'message_hash must not be empty'
            USING ERRCODE = '{{sqlstate::request_hash_invalid}}',
                  DETAIL = pg_catalog.format('consumer %s, message_id %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2)),
                  HINT = 'Pass a fingerprint of the message body, for example idem.request_hash(body).';
    END IF;
    IF $4 IS NOT NULL AND NOT idem.interval_is_positive($4) THEN
        RAISE EXCEPTION 'retention must be positive and finite'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('retention was %s.', $4),
                  HINT = 'Pass a positive interval, or NULL for idem.inbox_retention.';
    END IF;
    -- The consumer is the scope its owner check names.
    PERFORM idem.portable_check_scope_owner($1);

    IF $4 IS NOT NULL THEN
        expiry := clock + $4;
    END IF;

    -- Twice at most: a row purged between the insert's conflict and the
    -- second look is absent then, and the second pass inserts it.
    FOR step IN 1 .. 2 LOOP
        SELECT m.message_hash, m.expires_at INTO stored_hash, stored_expiry
          FROM idem.consumed_message m
         WHERE m.consumer = $1 AND m.message_id = $2;
        IF FOUND AND stored_expiry > clock THEN
            IF stored_hash IS DISTINCT FROM $3 THEN
                RAISE EXCEPTION 'message % of consumer % was consumed with a different message_hash',
                                idem.portable_msg_quoted($2), idem.portable_msg_quoted($1)
                    USING ERRCODE = '{{sqlstate::message_mismatch}}',
                          DETAIL = pg_catalog.format('consumer %s, message_id %s: stored hash %s, given %s.',
                                                     idem.portable_msg_quoted($1), idem.portable_msg_quoted($2),
                                                     COALESCE(idem.portable_msg_excerpt(stored_hash), 'NULL'),
                                                     idem.portable_msg_excerpt($3)),
                          HINT = 'A broker redelivers the same body under one id; a different body needs a new message id.';
            END IF;
            RETURN false;
        END IF;
        -- Without a retention argument the expiry is looked up here, for a
        -- new message only (a replay reads no policy and no setting): the
        -- consumer's policy (keep_forever, or its retention), else the
        -- setting (NULL for -1: forever). Before the insert, not in it:
        -- Citus refuses a subquery in an INSERT.
        IF expiry IS NULL THEN
            SELECT CASE WHEN p.keep_forever THEN 'infinity'::timestamptz ELSE clock + p.retention END
              INTO expiry
              FROM idem.scope_policy p
             WHERE p.scope = $1 AND (p.keep_forever OR p.retention IS NOT NULL);
            expiry := COALESCE(expiry, clock + idem.portable_msg_inbox_retention(), 'infinity'::timestamptz);
        END IF;
        INSERT INTO idem.consumed_message AS m (consumer, message_id, message_hash, consumed_at, expires_at)
        VALUES ($1, $2, $3, clock, expiry)
        ON CONFLICT ON CONSTRAINT consumed_message_pkey DO UPDATE
        SET message_hash = excluded.message_hash,
            consumed_at = excluded.consumed_at,
            expires_at = excluded.expires_at,
            result_ref_type = NULL,
            result_ref_id = NULL
        WHERE m.expires_at <= clock;
        IF FOUND THEN
            RETURN true;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'consume_once could not settle message % of consumer %',
                    idem.portable_msg_quoted($2), idem.portable_msg_quoted($1)
        USING ERRCODE = '{{sqlstate::internal}}',
              DETAIL = 'The message changed under two attempts in a row.',
              HINT = 'Retry the transaction.';
END
$function$
