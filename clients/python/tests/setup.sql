-- The tests' database, run by its owner after idem is installed (CREATE
-- EXTENSION, or dist/idem-portable.sql) and role idem_py_app exists: the
-- application role gets the README's request path (with idem.release and
-- idem.peek) and idem.claim_or_wait, and the tables the test handlers write
-- their effects to.
GRANT USAGE ON SCHEMA idem TO idem_py_app;
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
  TO idem_py_app;

CREATE SCHEMA shop;
-- One row per effect (a charge): what must happen once per key. No unique
-- constraint on the key: a duplicate would be counted, not refused.
CREATE TABLE shop.effects (
  id bigserial PRIMARY KEY,
  scope text NOT NULL,
  idempotency_key text NOT NULL,
  amount numeric NOT NULL,
  served_by text
);
GRANT USAGE ON SCHEMA shop TO idem_py_app;
GRANT SELECT, INSERT ON shop.effects TO idem_py_app;
GRANT USAGE ON SEQUENCE shop.effects_id_seq TO idem_py_app;

-- The README's example writes its orders here (the application's own table,
-- found on the default search_path).
CREATE TABLE public.orders (id bigserial PRIMARY KEY, item text NOT NULL);
GRANT SELECT, INSERT ON public.orders TO idem_py_app;
GRANT USAGE ON SEQUENCE public.orders_id_seq TO idem_py_app;
