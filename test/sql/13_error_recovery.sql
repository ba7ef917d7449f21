-- Errors cross the C++/Postgres boundary cleanly: a P4 error caught by a
-- PL/pgSQL handler (a subtransaction) leaves the backend fully usable, and
-- so does a Postgres error raised inside idem's SPI work.
SELECT kind FROM idem.claim_idempotency_key('recovery', 'k', 'h');
DO $$
DECLARE
  caught int := 0;
BEGIN
  FOR i IN 1..200 LOOP
    BEGIN
      PERFORM idem.claim_idempotency_key('recovery', 'k', 'other');
    EXCEPTION WHEN SQLSTATE 'P4002' THEN
      caught := caught + 1;
    END;
    BEGIN
      PERFORM idem.mark_succeeded('recovery', 'k', 1, 200);
    EXCEPTION WHEN SQLSTATE 'P4012' OR SQLSTATE 'P4010' THEN
      caught := caught + 1;
    END;
  END LOOP;
  RAISE NOTICE 'caught % errors', caught;
END $$;
SELECT kind FROM idem.claim_idempotency_key('recovery', 'k', 'h');

-- A Postgres error from inside the claim's own statement (here a value out
-- of range while computing the lock's end) also unwinds cleanly.
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('recovery', 'k2', 'h', NULL, interval '300000000 years')$$), ':', 1) AS out_of_range;
SELECT kind FROM idem.claim_idempotency_key('recovery', 'k2', 'h');

-- A claim and its outcome inside a subtransaction that rolls back leave no trace.
BEGIN;
SAVEPOINT before_claim;
SELECT kind FROM idem.claim_idempotency_key('recovery', 'k3', 'h');
ROLLBACK TO SAVEPOINT before_claim;
SELECT kind FROM idem.claim_idempotency_key('recovery', 'k3', 'h');
COMMIT;
SELECT status, attempt_count FROM idem.idempotency_request WHERE scope = 'recovery' AND key = 'k3';
