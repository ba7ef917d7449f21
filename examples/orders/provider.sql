-- The payment provider of the orders example: a separate database, reached
-- from the shop only through dblink, so a charge is a real foreign state
-- mutation that commits on its own, whatever the shop's transaction does.
--
-- Like Stripe, the provider deduplicates charges by the idempotency key the
-- merchant sends, with its own idem store. A charge is purely local work
-- here, so the claim, the charge and the stored outcome commit together in
-- one transaction: a retried charge returns the original charge.
CREATE EXTENSION IF NOT EXISTS idem;

CREATE SCHEMA psp;

CREATE SEQUENCE psp.charge_number;

CREATE TABLE psp.charges (
    id              text PRIMARY KEY,
    merchant        text NOT NULL,
    idempotency_key text NOT NULL,      -- as the merchant sent it
    amount_cents    bigint NOT NULL CHECK (amount_cents > 0),
    currency        text NOT NULL,
    payment_method  text NOT NULL,
    description     text,
    metadata        jsonb NOT NULL DEFAULT '{}',
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    failure_code    text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Deliberately no UNIQUE on idempotency_key: deduplication is idem's job,
-- and the example's tests count rows to prove it does it.

-- The test card that always declines, as in Stripe's test mode.
CREATE FUNCTION psp.card_declines(payment_method text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT payment_method = 'pm_card_declined' $$;

-- POST /v1/charges. Returns the HTTP status, the body, and what the
-- provider's key store said (new_claim, replay_success, final_failure).
CREATE FUNCTION psp.create_charge(
    merchant text, idempotency_key text, request jsonb,
    OUT status_code integer, OUT body jsonb, OUT claim_kind text)
LANGUAGE plpgsql AS $$
DECLARE
    scope constant text := 'charges:' || merchant;
    c idem.claim;
    charge_id text;
    declined boolean;
BEGIN
    c := idem.claim_idempotency_key(scope, idempotency_key, idem.request_hash(request), 'psp');
    claim_kind := c.kind::text;
    IF c.kind IN ('replay_success', 'final_failure') THEN
        status_code := c.response_code;
        body := c.response_body;
        RETURN;
    END IF;
    IF c.kind = 'processing_active' THEN
        -- Cannot outlive a transaction here (claim and charge commit
        -- together), but a client must still be told something true.
        status_code := 409;
        body := jsonb_build_object('error', jsonb_build_object(
            'type', 'idempotency_error', 'message', 'a request with this key is in progress'));
        RETURN;
    END IF;

    -- The card network's round trip: long enough that concurrent twins at
    -- the shop really overlap.
    PERFORM pg_sleep(0.1);

    declined := psp.card_declines(request->>'payment_method');
    charge_id := 'ch_' || lpad(nextval('psp.charge_number')::text, 6, '0');
    INSERT INTO psp.charges (id, merchant, idempotency_key, amount_cents, currency,
                             payment_method, description, metadata, status, failure_code)
    VALUES (charge_id, merchant, idempotency_key, (request->>'amount_cents')::bigint,
            request->>'currency', request->>'payment_method', request->>'description',
            coalesce(request->'metadata', '{}'),
            CASE WHEN declined THEN 'failed' ELSE 'succeeded' END,
            CASE WHEN declined THEN 'card_declined' END);

    IF declined THEN
        status_code := 402;
        body := jsonb_build_object('error', jsonb_build_object(
            'type', 'card_error', 'code', 'card_declined',
            'message', 'Your card was declined.', 'charge', charge_id));
        -- A decline is final: retrying it with the same key replays it.
        PERFORM idem.mark_failed(scope, idempotency_key, c.fence, false, 'card_declined',
                                 'Your card was declined.', status_code, body);
    ELSE
        status_code := 200;
        body := jsonb_build_object('id', charge_id, 'object', 'charge',
                                   'amount', (request->>'amount_cents')::bigint,
                                   'currency', request->>'currency', 'status', 'succeeded');
        PERFORM idem.mark_succeeded(scope, idempotency_key, c.fence, status_code, body,
                                    'charge', charge_id);
    END IF;
END $$;

-- Receipts the shop sends after its commits, through idem's outbox and
-- clients/relay/idem-relay. The relay calls idem.consume_once with the event's
-- delivery key in this database's transaction before it calls this, so a
-- redelivery (a relay killed after delivering, before marking) inserts
-- nothing. Deliberately no UNIQUE either: the tests count rows.
CREATE TABLE psp.receipts (
    id           bigserial PRIMARY KEY,
    order_id     bigint NOT NULL,
    customer     text NOT NULL,
    charge_id    text,
    delivery_key text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION psp.send_receipt(event_type text, payload jsonb, headers jsonb, delivery_key text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO psp.receipts (order_id, customer, charge_id, delivery_key)
    VALUES ((payload->>'order_id')::bigint, payload->>'customer', payload->>'charge_id', delivery_key);
$$;
