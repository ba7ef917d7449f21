-- idem's own writes evaluate the key table's CHECK constraints from
-- expressions compiled once per backend (src/compiled_checks.cpp). Every
-- constraint must still hold on every row they write, with Postgres's own
-- error, and a change to the table's constraints must be seen at once.

-- Compile, by writing through idem (a claim inserts, a completion updates).
SELECT kind FROM idem.claim_idempotency_key('checks', 'warm', 'h');
SELECT idem.mark_succeeded('checks', 'warm', fence, 200)
  FROM idem.idempotency_request WHERE scope = 'checks' AND key = 'warm';

-- A constraint added after compiling is enforced on the next write, in the
-- insert (claim) and in the update (completion) paths alike.
ALTER TABLE idem.idempotency_request
  ADD CONSTRAINT test_no_forbidden_scope CHECK (scope <> 'forbidden');
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('forbidden', 'k', 'h')$$), E'\n', 1) AS added_on_insert;
ALTER TABLE idem.idempotency_request
  ADD CONSTRAINT test_no_teapot CHECK (response_code IS DISTINCT FROM 418);
SELECT kind FROM idem.claim_idempotency_key('checks', 'k2', 'h');
SELECT split_part(error_of($$SELECT idem.mark_succeeded('checks', 'k2', fence, 418)
                   FROM idem.idempotency_request WHERE scope = 'checks' AND key = 'k2'$$), E'\n', 1)
  AS added_on_update;
SELECT status FROM idem.idempotency_request WHERE scope = 'checks' AND key = 'k2';

-- Dropped again: the same writes now pass.
ALTER TABLE idem.idempotency_request DROP CONSTRAINT test_no_forbidden_scope;
ALTER TABLE idem.idempotency_request DROP CONSTRAINT test_no_teapot;
SELECT kind FROM idem.claim_idempotency_key('forbidden', 'k', 'h');
SELECT idem.mark_succeeded('checks', 'k2', fence, 418)
  FROM idem.idempotency_request WHERE scope = 'checks' AND key = 'k2';

-- A constraint calling a user-defined function is not compiled ahead (it
-- could run statements of its own): Postgres builds it per statement, as
-- always, and it is enforced all the same, with the built-in ones.
CREATE FUNCTION test_key_allowed(k text) RETURNS boolean IMMUTABLE LANGUAGE sql
AS $$ SELECT k <> 'refused-by-function' $$;
ALTER TABLE idem.idempotency_request
  ADD CONSTRAINT test_key_allowed CHECK (test_key_allowed(key));
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('checks', 'refused-by-function', 'h')$$), E'\n', 1)
  AS user_function_constraint;
ALTER TABLE idem.idempotency_request
  ADD CONSTRAINT test_no_299 CHECK (response_code IS DISTINCT FROM 299);
SELECT kind FROM idem.claim_idempotency_key('checks', 'k3', 'h');
SELECT split_part(error_of($$SELECT idem.mark_succeeded('checks', 'k3', fence, 299)
                   FROM idem.idempotency_request WHERE scope = 'checks' AND key = 'k3'$$), E'\n', 1)
  AS plain_constraint_beside_it;
ALTER TABLE idem.idempotency_request DROP CONSTRAINT test_key_allowed;
ALTER TABLE idem.idempotency_request DROP CONSTRAINT test_no_299;
DROP FUNCTION test_key_allowed(text);

-- Statements written by hand against the table are Postgres's own business
-- and are checked as always.
SELECT split_part(error_of($$UPDATE idem.idempotency_request SET fence = 0
                   WHERE scope = 'checks' AND key = 'k3'$$), E'\n', 1) AS hand_written_update;

-- One statement making many claims evaluates the compiled copy once per
-- row: the 150th row breaks a constraint and the whole statement fails.
ALTER TABLE idem.idempotency_request
  ADD CONSTRAINT test_not_150 CHECK (scope <> 'checks-many' OR key <> '150');
SELECT split_part(error_of($$SELECT count(*) FROM generate_series(1, 200) g,
  LATERAL idem.claim_idempotency_key('checks-many', g::text, 'h') c$$), E'\n', 1) AS row_150;
SELECT count(*) AS rows_left_by_failed_statement FROM idem.idempotency_request WHERE scope = 'checks-many';
ALTER TABLE idem.idempotency_request DROP CONSTRAINT test_not_150;
SELECT count(*) AS claims FROM generate_series(1, 200) g,
  LATERAL idem.claim_idempotency_key('checks-many', g::text, 'h') c WHERE c.kind = 'new_claim';

DELETE FROM idem.idempotency_request WHERE scope IN ('checks', 'checks-many', 'forbidden');
