-- The examples' database: idem, the shop's orders table, and an application
-- role with exactly the README's grants (README, "Privileges") plus its own
-- table. Run as a superuser in a fresh database.
CREATE EXTENSION idem;
CREATE ROLE clients_app LOGIN;
GRANT USAGE ON SCHEMA idem TO clients_app;
GRANT EXECUTE ON FUNCTION
    idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.claim_or_wait(text, text, text, interval, text, interval, interval),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.set_recovery_point(text, text, bigint, text),
    idem.mark_succeeded_returning(text, text, bigint, integer, jsonb, text, text),
    idem.mark_failed_returning(text, text, bigint, boolean, text, text, integer, jsonb),
    idem.retry_after(text, idem.claim),
    idem.release(text, text, bigint),
    idem.peek(text, text)
  TO clients_app;

CREATE SCHEMA shop;
-- One row per order taken: the effect that must happen once per key.
CREATE TABLE shop.orders (
  id bigserial PRIMARY KEY,
  idempotency_key text NOT NULL,
  item text NOT NULL,
  quantity integer NOT NULL,
  served_by text NOT NULL
);
GRANT USAGE ON SCHEMA shop TO clients_app;
GRANT SELECT, INSERT ON shop.orders TO clients_app;
GRANT USAGE ON SEQUENCE shop.orders_id_seq TO clients_app;
