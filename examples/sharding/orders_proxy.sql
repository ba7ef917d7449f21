-- The orders demo (examples/orders/shop.sql) behind the PL/Proxy database
-- of proxy.sql (load that first): each phase of a request runs on the shard
-- of its (scope, key), routed by the same idem.shard_hash as idem's own
-- calls, so a key, its recovery points, its order, audit row and receipt
-- job commit together on one shard. Every shard holds shop.sql; each
-- routed call is one transaction there, which is why phase 4 (receipt event
-- + final mark) is the one call shop.stage_receipt_and_finish.
CREATE SCHEMA shop;

SELECT idem.route_by_key(signature) FROM (VALUES
    ('shop.claim_order_request(scope text, key text, request jsonb, lock_timeout interval)
        RETURNS idem.claim'),
    ('shop.claim_or_wait_order_request(scope text, key text, request jsonb, lock_timeout interval,
        max_wait interval) RETURNS idem.claim'),
    ('shop.create_order(scope text, key text, fence bigint, request jsonb) RETURNS bigint'),
    -- The charge at the provider: the shard calls it (dblink), as unsharded.
    ('shop.charge_order(scope text, key text, OUT order_id bigint, OUT provider_key text,
        OUT status_code integer, OUT body jsonb, OUT provider_claim text)'),
    ('shop.record_charge(scope text, key text, fence bigint, charge_id text) RETURNS void'),
    ('shop.record_payment_failure(scope text, key text, fence bigint, provider_body jsonb,
        OUT status_code integer, OUT body jsonb)'),
    ('shop.record_provider_unavailable(scope text, key text, fence bigint, detail text,
        OUT status_code integer, OUT body jsonb)'),
    ('shop.stage_receipt_and_finish(scope text, key text, fence bigint,
        OUT status_code integer, OUT body jsonb)')
) AS routed (signature);
