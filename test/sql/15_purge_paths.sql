-- purge_expired deletes the rows it read in place, without a row lock first
-- (src/keys/maintenance.cpp). It must still act like the SQL DELETE it replaces:
-- oldest first, never a processing row, counted in the table's statistics,
-- and, where someone put a delete trigger on the table, fire it.

CREATE FUNCTION expired_outcomes(p_scope text, n int) RETURNS void LANGUAGE sql AS $$
  INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point,
      fence, claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
  SELECT p_scope, g::text, 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
         now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
         now() - interval '2 days', now() - interval '1 day' + g * interval '1 second', 200
  FROM generate_series(1, n) g;
$$;

-- Oldest first, batch by batch; a processing row past its expiry is never
-- purged (the sweeper's business).
SELECT expired_outcomes('purge-order', 10);
SELECT kind FROM idem.claim_idempotency_key('purge-order', 'in-flight', 'h');
UPDATE idem.idempotency_request SET created_at = now() - interval '3 days',
       expires_at = now() - interval '2 days' WHERE scope = 'purge-order' AND key = 'in-flight';
SELECT idem.purge_expired(4) AS first_batch;
SELECT string_agg(key, ',' ORDER BY key::int) AS left_after_first
  FROM idem.idempotency_request WHERE scope = 'purge-order' AND key <> 'in-flight';

-- Counted in the table's statistics like any delete (both readings in one
-- transaction, so no flush of earlier counts falls in between), and visible
-- to the rest of the transaction at once.
BEGIN;
SELECT n_tup_del AS deletes_before FROM pg_stat_xact_user_tables
 WHERE relid = 'idem.idempotency_request'::regclass \gset
SELECT idem.purge_expired(100) AS second_batch;
SELECT n_tup_del - :deletes_before AS deletes_counted FROM pg_stat_xact_user_tables
 WHERE relid = 'idem.idempotency_request'::regclass;
SELECT key, status FROM idem.idempotency_request WHERE scope = 'purge-order';
COMMIT;

-- A row the purge's own transaction changed earlier is the version it reads
-- and deletes.
BEGIN;
SELECT expired_outcomes('purge-own', 2);
UPDATE idem.idempotency_request SET response_code = 201 WHERE scope = 'purge-own' AND key = '1';
SELECT idem.purge_expired() AS own_rows;
SELECT count(*) AS own_rows_left FROM idem.idempotency_request WHERE scope = 'purge-own';
COMMIT;

-- A delete trigger on the key table (say, an audit) sends the purge through a
-- plain SQL DELETE, so the trigger sees every purged row.
CREATE TABLE purged_audit (scope text, key text);
CREATE FUNCTION audit_purge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.purged_audit VALUES (OLD.scope, OLD.key);
  RETURN OLD;
END $$;
CREATE TRIGGER audit_purge AFTER DELETE ON idem.idempotency_request
  FOR EACH ROW EXECUTE FUNCTION audit_purge();
SELECT expired_outcomes('purge-audited', 5);
SELECT idem.purge_expired() AS audited_purge;
SELECT string_agg(key, ',' ORDER BY key::int) AS audited_keys FROM purged_audit;
DROP TRIGGER audit_purge ON idem.idempotency_request;
SELECT expired_outcomes('purge-unaudited', 3);
SELECT idem.purge_expired() AS unaudited_purge;
SELECT count(*) AS audit_rows FROM purged_audit;

DROP TABLE purged_audit;
DROP FUNCTION audit_purge();
DROP FUNCTION expired_outcomes(text, int);
DELETE FROM idem.idempotency_request WHERE scope LIKE 'purge-%';
