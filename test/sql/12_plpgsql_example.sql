-- The README's example: a PL/pgSQL function that claims, writes and marks.
CREATE TABLE shop_order (id bigserial PRIMARY KEY, customer text NOT NULL, amount numeric NOT NULL);

CREATE FUNCTION create_order(idempotency_key text, request jsonb,
                             OUT status_code int, OUT body jsonb, OUT replayed boolean)
LANGUAGE plpgsql AS $$
DECLARE
  c idem.claim;
  order_id bigint;
BEGIN
  c := idem.claim_idempotency_key('create_order', idempotency_key,
                                  idem.request_hash(request), 'api');
  CASE c.kind
    WHEN 'replay_success', 'final_failure' THEN
      status_code := c.response_code; body := c.response_body; replayed := true;
      RETURN;
    WHEN 'processing_active' THEN
      status_code := 409;
      body := jsonb_build_object('retry_after_seconds',
                ceil(extract(epoch FROM c.locked_until - clock_timestamp())));
      replayed := false;
      RETURN;
    ELSE  -- new_claim, retryable_failure, processing_stale: we own the key
      IF (request->>'amount')::numeric <= 0 THEN
        PERFORM idem.mark_failed('create_order', idempotency_key, c.fence, false,
                                 'invalid_amount', 'amount must be positive', 422,
                                 '{"error": "invalid_amount"}');
        status_code := 422; body := '{"error": "invalid_amount"}'; replayed := false;
        RETURN;
      END IF;
      INSERT INTO shop_order (customer, amount)
        VALUES (request->>'customer', (request->>'amount')::numeric)
        RETURNING id INTO order_id;
      status_code := 201;
      body := jsonb_build_object('order_id', order_id);
      replayed := false;
      PERFORM idem.mark_succeeded('create_order', idempotency_key, c.fence,
                                  status_code, body, 'shop_order', order_id::text);
  END CASE;
END $$;

SELECT * FROM create_order('req-1', '{"customer": "ada", "amount": 12.50}');
SELECT * FROM create_order('req-1', '{"amount": 12.50, "customer": "ada"}');  -- a retry: replayed
SELECT * FROM create_order('req-2', '{"customer": "bob", "amount": -1}');
SELECT * FROM create_order('req-2', '{"customer": "bob", "amount": -1}');     -- final failure replayed
SELECT error_of($$SELECT * FROM create_order('req-1', '{"customer": "eve", "amount": 99}')$$) LIKE 'P4002:%' AS changed_body_refused;
SELECT count(*) AS orders FROM shop_order;
-- A concurrent twin (simulated: the key is held by an open claim).
SELECT kind FROM idem.claim_idempotency_key('create_order', 'req-3', idem.request_hash('{"customer": "cy", "amount": 5}'::jsonb));
SELECT status_code, body ? 'retry_after_seconds' AS has_retry_after, replayed
  FROM create_order('req-3', '{"customer": "cy", "amount": 5}');
