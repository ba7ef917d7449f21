-- The orders API of the example: POST /orders creates an order, charges the
-- customer at the payment provider (another database, through dblink) and
-- queues a receipt e-mail. The charge cannot share a transaction with the
-- shop's writes, so the request is cut into atomic phases (Brandur Leach's
-- design) and each phase commits together with its idem recovery point:
--
--   phase 1  claim the key                      (recovery point: started)
--   phase 2  order + audit row                  -> order_created
--   foreign  charge at the provider, with a key derived from ours
--   phase 3  record the charge id               -> charge_created
--   phase 4  stage the receipt job + 201        -> finished
--
-- A request that dies anywhere resumes, on its retry, from the last
-- recovery point that committed. The caller (the API server) runs each
-- phase as one transaction; phase 4 is two calls, stage_receipt and
-- finish_order, inside one transaction.
--
-- Deployment wires the provider in as a dblink_fdw server named
-- payment_provider (see lib/Orders/Setup.pm).
CREATE EXTENSION IF NOT EXISTS idem;
CREATE EXTENSION IF NOT EXISTS dblink;

CREATE SCHEMA shop;

CREATE TABLE shop.orders (
    id                bigserial PRIMARY KEY,
    idempotency_scope text NOT NULL,
    idempotency_key   text NOT NULL,
    customer          text NOT NULL,
    amount_cents      bigint NOT NULL CHECK (amount_cents > 0),
    currency          text NOT NULL,
    payment_method    text NOT NULL,
    status            text NOT NULL DEFAULT 'awaiting_payment'
                      CHECK (status IN ('awaiting_payment', 'paid', 'payment_failed')),
    charge_id         text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Not UNIQUE: one order per intent is idem's guarantee, and the tests count
-- rows to prove it. A key that expired and came back is a new intent with a
-- new order, and the newest order of a key is the one its phases work on.
CREATE INDEX orders_by_idempotency_key ON shop.orders (idempotency_scope, idempotency_key, id);

CREATE TABLE shop.audit_log (
    id         bigserial PRIMARY KEY,
    order_id   bigint NOT NULL REFERENCES shop.orders,
    action     text NOT NULL,
    detail     jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The receipt e-mail leaves through idem's transactional outbox: phase 4
-- puts it (idem.outbox_put) in the transaction that marks the key
-- succeeded, so it exists if and only if that commit happened, and
-- clients/relay/idem-relay delivers it after the commit to the provider's
-- receipts, which deduplicate on its delivery key (idem.consume_once).

-- The merchant account the shop holds at the provider.
CREATE FUNCTION shop.merchant_account() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'acct_shop' $$;

-- Phase 1: claim the key for this exact request (JCS + SHA-256, so a retry
-- whose JSON has its members in another order is the same request).
CREATE FUNCTION shop.claim_order_request(
    scope text, key text, request jsonb, lock_timeout interval)
RETURNS idem.claim
LANGUAGE sql AS $$
    SELECT idem.claim_idempotency_key(scope, key, idem.request_hash(request),
                                      'shop-api/' || pg_backend_pid(), lock_timeout)
$$;

-- Phase 1 for a client that would rather wait than be told 409 (idem 1.1):
-- a twin of a request in flight waits, for at most max_wait, for its outcome.
CREATE FUNCTION shop.claim_or_wait_order_request(
    scope text, key text, request jsonb, lock_timeout interval, max_wait interval)
RETURNS idem.claim
LANGUAGE sql AS $$
    SELECT idem.claim_or_wait(scope, key, idem.request_hash(request), max_wait,
                              'shop-api/' || pg_backend_pid(), lock_timeout)
$$;

-- The order the key's current phases work on (see the index comment).
CREATE FUNCTION shop.order_for_key(scope text, key text) RETURNS shop.orders
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found_order shop.orders;
BEGIN
    SELECT * INTO found_order FROM shop.orders o
     WHERE o.idempotency_scope = scope AND o.idempotency_key = key
     ORDER BY o.id DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no order for idempotency key % in %', key, scope
            USING HINT = 'A recovery point past started promises an order: this is a bug.';
    END IF;
    RETURN found_order;
END $$;

-- Phase 2: the order, its audit row and the recovery point commit together.
-- The recovery point goes first: it checks the fence and locks the key row,
-- so a request that was taken over writes nothing at all.
CREATE FUNCTION shop.create_order(scope text, key text, fence bigint, request jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    order_id bigint;
BEGIN
    PERFORM idem.set_recovery_point(scope, key, fence, 'order_created');
    INSERT INTO shop.orders (idempotency_scope, idempotency_key, customer, amount_cents,
                             currency, payment_method)
    VALUES (scope, key, request->>'customer', (request->>'amount_cents')::bigint,
            request->>'currency', request->>'payment_method')
    RETURNING id INTO order_id;
    INSERT INTO shop.audit_log (order_id, action, detail)
    VALUES (order_id, 'order.created', jsonb_build_object('idempotency_key', key, 'fence', fence));
    RETURN order_id;
END $$;

-- The key the provider deduplicates our charge by. Derived, never the
-- caller's key passed through: the caller's key is scoped to our API, the
-- provider needs one scoped to our merchant account. It is the same on every
-- retry of one intent (same scope, key and order), and it differs for a key
-- that expired and came back with a new order.
CREATE FUNCTION shop.provider_idempotency_key(scope text, key text, order_id bigint)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'shop-charge-' || idem.request_hash(jsonb_build_array(scope, key, order_id, 'charge'))
$$;

-- The foreign state mutation: charge the order at the provider. Writes
-- nothing here, so it needs no fence: a zombie that calls it gets the same
-- charge back and then fails at its next fenced write.
CREATE FUNCTION shop.charge_order(
    scope text, key text,
    OUT order_id bigint, OUT provider_key text,
    OUT status_code integer, OUT body jsonb, OUT provider_claim text)
LANGUAGE plpgsql AS $$
DECLARE
    o shop.orders;
    charge_request jsonb;
BEGIN
    o := shop.order_for_key(scope, key);
    order_id := o.id;
    provider_key := shop.provider_idempotency_key(scope, key, o.id);
    charge_request := jsonb_build_object(
        'amount_cents', o.amount_cents, 'currency', o.currency,
        'payment_method', o.payment_method, 'description', 'shop order ' || o.id,
        'metadata', jsonb_build_object('order_id', o.id));
    -- dblink commits at the provider on its own: this is the moment the
    -- card is charged, whatever becomes of the shop's transaction.
    SELECT r.status_code, r.body, r.claim_kind
      INTO status_code, body, provider_claim
      FROM dblink('payment_provider',
                  format('SELECT status_code, body, claim_kind FROM psp.create_charge(%L, %L, %L::jsonb)',
                         shop.merchant_account(), provider_key, charge_request))
           AS r(status_code integer, body jsonb, claim_kind text);
END $$;

-- Phase 3: the charge id and the recovery point commit together.
CREATE FUNCTION shop.record_charge(scope text, key text, fence bigint, charge_id text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    o shop.orders;
BEGIN
    PERFORM idem.set_recovery_point(scope, key, fence, 'charge_created');
    o := shop.order_for_key(scope, key);
    UPDATE shop.orders SET status = 'paid', charge_id = record_charge.charge_id,
                           updated_at = clock_timestamp()
     WHERE id = o.id;
END $$;

-- A declined card is a final outcome: stored as 402 and replayed as such.
CREATE FUNCTION shop.record_payment_failure(
    scope text, key text, fence bigint, provider_body jsonb,
    OUT status_code integer, OUT body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    o shop.orders;
BEGIN
    o := shop.order_for_key(scope, key);
    UPDATE shop.orders SET status = 'payment_failed', updated_at = clock_timestamp()
     WHERE id = o.id;
    status_code := 402;
    body := jsonb_build_object('error', jsonb_build_object(
        'type', 'payment_failed', 'order_id', o.id,
        'code', provider_body->'error'->>'code',
        'message', provider_body->'error'->>'message'));
    PERFORM idem.mark_failed(scope, key, fence, false, 'card_declined',
                             provider_body->'error'->>'message', status_code, body);
END $$;

-- Phase 4, first half: put the receipt event in the outbox. Must run in the
-- same transaction as finish_order, whose fenced mark_succeeded decides
-- whether the event (and the whole phase) commits. One event per key: a
-- phase 4 that runs again after a crash puts the same event.
CREATE FUNCTION shop.stage_receipt(scope text, key text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    o shop.orders;
BEGIN
    o := shop.order_for_key(scope, key);
    RETURN idem.outbox_put(scope, key, 'receipt',
                           jsonb_build_object('order_id', o.id, 'customer', o.customer,
                                              'charge_id', o.charge_id),
                           'order', o.id::text);
END $$;

-- Phase 4, second half: the 201 response, stored for replay. It carries the
-- order's creation time, so a re-executed request could never produce the
-- same bytes as a replayed one.
CREATE FUNCTION shop.finish_order(
    scope text, key text, fence bigint,
    OUT status_code integer, OUT body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    o shop.orders;
BEGIN
    o := shop.order_for_key(scope, key);
    status_code := 201;
    body := jsonb_build_object(
        'id', o.id, 'object', 'order', 'status', o.status, 'customer', o.customer,
        'amount_cents', o.amount_cents, 'currency', o.currency, 'charge', o.charge_id,
        'receipt', 'queued', 'created_at', o.created_at);
    PERFORM idem.mark_succeeded(scope, key, fence, status_code, body, 'shop.orders', o.id::text);
END $$;

-- Phase 4 in one call: the receipt job and the final mark in the caller's
-- one transaction. For a sharded shop behind PL/Proxy
-- (examples/sharding/orders_proxy.sql), where each routed call is its own
-- transaction on the key's shard, so the two halves must be one call.
CREATE FUNCTION shop.stage_receipt_and_finish(
    scope text, key text, fence bigint,
    OUT status_code integer, OUT body jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM shop.stage_receipt(scope, key);
    SELECT f.status_code, f.body INTO status_code, body FROM shop.finish_order(scope, key, fence) f;
END $$;

-- A provider that could not be reached left the card uncharged or charged
-- (we cannot know which): the key becomes retryable, and the next retry
-- resumes at order_created and asks again with the same derived key.
CREATE FUNCTION shop.record_provider_unavailable(
    scope text, key text, fence bigint, detail text,
    OUT status_code integer, OUT body jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    status_code := 503;
    body := jsonb_build_object('error', jsonb_build_object(
        'type', 'provider_unavailable', 'message', 'the payment provider could not be reached; retry'));
    PERFORM idem.mark_failed(scope, key, fence, true, 'provider_unavailable', detail,
                             status_code, body);
END $$;

-- The completer (idem 1.1, docs/policy.md): a request whose client never
-- came back is finished by idem's background worker, which claims the key
-- itself (claimed_by 'idem completer', the attempt counted) and calls this
-- function, as its owner, with its own fence and the recovery point the
-- client's last attempt committed. It runs the remaining phases in one
-- transaction: the charge is asked for again with the same derived key, so
-- a card charged before the client vanished is answered from the
-- provider's idempotency store, never charged twice; the receipt goes
-- through the outbox with the final mark, so it is sent exactly once.
CREATE FUNCTION shop.complete_order(
    scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    charge record;
BEGIN
    IF recovery_point = 'started' THEN
        -- Nothing was created or charged, and idem keeps only the request's
        -- hash: there is nothing to finish, so the key ends (410).
        PERFORM idem.mark_failed(scope, key, fence, false, 'abandoned_by_client',
            'the client left before its order was created', 410,
            jsonb_build_object('error', jsonb_build_object(
                'type', 'abandoned', 'message', 'the request was abandoned before it took effect; send it again with a new key')));
        RETURN;
    END IF;
    IF recovery_point = 'order_created' THEN
        SELECT * INTO charge FROM shop.charge_order(scope, key);
        IF charge.status_code = 402 THEN
            PERFORM shop.record_payment_failure(scope, key, fence, charge.body);
            RETURN;
        ELSIF charge.status_code <> 200 THEN
            RAISE EXCEPTION 'the provider answered % for order %', charge.status_code, charge.order_id
                USING DETAIL = charge.body::text,
                      HINT = 'idem''s worker runs the completer again after the scope''s completer_delay.';
        END IF;
        PERFORM shop.record_charge(scope, key, fence, charge.body->>'id');
    END IF;
    PERFORM shop.stage_receipt_and_finish(scope, key, fence);
END $$;

-- The orders scope's policy: a request nobody retried for 5 seconds after
-- its lock ran out is finished by the completer above, under a lock of its
-- own of 30 seconds (which bounds the completer's statement_timeout). A
-- client that does come back retries long before that, so the completer
-- only takes what was truly abandoned; and a key the completer has claimed
-- answers a late client processing_active, then the stored response.
INSERT INTO idem.scope_policy (scope, lock_timeout, completer, completer_delay)
VALUES ('POST /orders', '30 seconds',
        'shop.complete_order(text, text, bigint, text, integer)', '5 seconds');
