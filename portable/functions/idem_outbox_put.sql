-- outbox_put (src/messages/outbox.cpp): the event's id, the same id for the
-- same event again, {{sqlstate::event_mismatch}} for another payload; NOTIFY idem_outbox, which
-- PostgreSQL delivers at commit only. Puts of one aggregate first take the
-- C++ engine's transaction-level advisory lock on it (class 1768187245,
-- hashtext of "aggregate_type/aggregate_id"), so an aggregate's events
-- commit in id order under either engine. The delivery key is what the C++
-- statement stores, idem.request_hash(jsonb_build_array(scope, key,
-- event_type)), written out: the RFC 8785 form of an array of three strings
-- is the three strings as jsonb writes them (its escapes are RFC 8785's),
-- between brackets and commas, so the same bytes are hashed without the
-- canonicalizer's queries (087_portable_request_hash compares them with the C++ engine's).
LANGUAGE plpgsql
AS $function$
DECLARE
    clock timestamptz := pg_catalog.statement_timestamp();
    event_id bigint;
    same_payload boolean;
    identity_bytes integer;
BEGIN
    IF $1 IS NULL OR pg_catalog.char_length($1) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'scope must be 1 to 255 characters'
            USING ERRCODE = '{{sqlstate::scope_invalid}}',
                  DETAIL = pg_catalog.format('scope was %s.', idem.portable_msg_quoted($1)),
                  HINT = 'Pass the scope of the key the event belongs to.';
    END IF;
    IF $2 IS NULL OR pg_catalog.char_length($2) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'key must be 1 to 255 characters'
            USING ERRCODE = '{{sqlstate::key_invalid}}',
                  DETAIL = pg_catalog.format('scope %s, key %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2, 40)),
                  HINT = 'Pass the idempotency key of the request that produced the event.';
    END IF;
    IF $3 IS NULL OR $3 = '' OR $4 IS NULL THEN
        RAISE EXCEPTION 'event_type and payload must be given'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('scope %s, key %s: event_type %s, payload %s.',
                                             idem.portable_msg_quoted($1), idem.portable_msg_quoted($2),
                                             idem.portable_msg_quoted($3),
                                             COALESCE(idem.portable_msg_excerpt($4::text), 'NULL')),
                  HINT = 'Name the event type and pass a jsonb payload (''{}'' for none).';
    END IF;
    IF pg_catalog.char_length($3) > 255 THEN
        RAISE EXCEPTION 'event_type must be 1 to 255 characters'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('scope %s, key %s: event_type %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2), idem.portable_msg_quoted($3, 40)),
                  HINT = 'Name the event type in at most 255 characters, such as ''order.created''.';
    END IF;
    -- An empty aggregate name passes, as in C++.
    IF pg_catalog.char_length($5) > 255 THEN
        RAISE EXCEPTION 'aggregate_type must be at most 255 characters'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('scope %s, key %s: aggregate_type %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2), idem.portable_msg_quoted($5, 40)),
                  HINT = 'Name the aggregate in at most 255 characters, such as its primary key.';
    END IF;
    IF pg_catalog.char_length($6) > 255 THEN
        RAISE EXCEPTION 'aggregate_id must be at most 255 characters'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('scope %s, key %s: aggregate_id %s.', idem.portable_msg_quoted($1),
                                             idem.portable_msg_quoted($2), idem.portable_msg_quoted($6, 40)),
                  HINT = 'Name the aggregate in at most 255 characters, such as its primary key.';
    END IF;
    -- scope, key and event_type are one entry of the unique index, which
    -- holds about 2,700 bytes.
    identity_bytes := pg_catalog.octet_length($1) + pg_catalog.octet_length($2) + pg_catalog.octet_length($3);
    IF identity_bytes > 2600 THEN
        RAISE EXCEPTION 'scope, key and event_type are too long together'
            USING ERRCODE = '{{sqlstate::bad_argument}}',
                  DETAIL = pg_catalog.format('scope %s, key %s, event_type %s: %s bytes in the server''s encoding; at most %s fit the outbox''s index.',
                                             idem.portable_msg_quoted($1, 40), idem.portable_msg_quoted($2, 40),
                                             idem.portable_msg_quoted($3, 40), identity_bytes, 2600),
                  HINT = 'Use a shorter event_type.';
    END IF;
    PERFORM idem.portable_check_scope_owner($1);
    IF $6 IS NOT NULL THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(1768187245,
                    pg_catalog.hashtext(COALESCE($5, '') || '/' || $6));
    END IF;

    INSERT INTO idem.outbox_event (
        scope, key, event_type, payload, aggregate_type, aggregate_id, headers,
        delivery_key, available_at, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7,
            pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
                '[' || pg_catalog.to_jsonb($1)::text || ',' || pg_catalog.to_jsonb($2)::text
                    || ',' || pg_catalog.to_jsonb($3)::text || ']', 'UTF8')), 'hex'),
            COALESCE($8, clock), clock)
    ON CONFLICT ON CONSTRAINT outbox_event_identity DO NOTHING
    RETURNING outbox_event.id INTO event_id;
    IF FOUND THEN
        PERFORM pg_catalog.pg_notify('idem_outbox', $3);
        RETURN event_id;
    END IF;
    -- The event is there (a twin's insert committed meanwhile is seen too).
    SELECT e.id, e.payload = $4 INTO event_id, same_payload
      FROM idem.outbox_event e
     WHERE e.scope = $1 AND e.key = $2 AND e.event_type = $3;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT same_payload THEN
        RAISE EXCEPTION 'outbox event % of key % was put with a different payload',
                        idem.portable_msg_quoted($3), idem.portable_msg_quoted($2)
            USING ERRCODE = '{{sqlstate::event_mismatch}}',
                  DETAIL = pg_catalog.format('scope %s, key %s, event_type %s: event %s has another payload.',
                                             idem.portable_msg_quoted($1), idem.portable_msg_quoted($2),
                                             idem.portable_msg_quoted($3), event_id),
                  HINT = 'An event is put once per (scope, key, event_type); a different event needs its own key or type.';
    END IF;
    RETURN event_id;
END
$function$
