-- The tests' database objects, run by the owner of idem's objects in a
-- database with idem installed (CREATE EXTENSION, or dist/idem-portable.sql),
-- with :app the tests' login role: the README's grants for the request path,
-- and the tables the tests' handlers write their effects to.
GRANT USAGE ON SCHEMA idem TO :"app";
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
  TO :"app";

CREATE SCHEMA node_test;
-- One row per effect: what must happen once per key.
CREATE TABLE node_test.effects (
  id bigserial PRIMARY KEY,
  scope text NOT NULL,
  key text NOT NULL,
  what text NOT NULL DEFAULT 'effect',
  body jsonb
);
GRANT USAGE ON SCHEMA node_test TO :"app";
GRANT SELECT, INSERT ON node_test.effects TO :"app";
GRANT USAGE ON SEQUENCE node_test.effects_id_seq TO :"app";

-- The README's five-line example writes here (search_path node_test).
CREATE TABLE node_test.orders (id bigserial PRIMARY KEY, item text NOT NULL);
GRANT SELECT, INSERT ON node_test.orders TO :"app";
GRANT USAGE ON SEQUENCE node_test.orders_id_seq TO :"app";
