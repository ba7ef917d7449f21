-- Install idem and a helper that shows an error's SQLSTATE, message, detail
-- and hint without the C source locations VERBOSITY verbose would print.
-- IF NOT EXISTS, quietly: test/t/040_upgrade.pl runs these files again on a
-- database whose idem was created at 1.0 and updated.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem;
RESET client_min_messages;
SELECT extname, extversion, extrelocatable, nspname
  FROM pg_extension JOIN pg_namespace n ON n.oid = extnamespace WHERE extname = 'idem';

CREATE FUNCTION error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  state text; message text; detail text; hint text;
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                          detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN state || ': ' || message
      || E'\n  detail: ' || coalesce(nullif(detail, ''), '(none)')
      || E'\n  hint: ' || coalesce(nullif(hint, ''), '(none)');
END $$;

-- SQLSTATE and message only, for errors whose details name fences or
-- times that depend on test order.
CREATE FUNCTION state_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- The WAL records this backend wrote while running a query (EXPLAIN's WAL
-- option), so that another process writing WAL at the same time (autovacuum,
-- a checkpoint) cannot change the answer, as the cluster's LSN would.
CREATE FUNCTION wal_records_of(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, WAL, FORMAT JSON) ' || query INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'WAL Records')::bigint;
END $$;

-- Ages a key as if time had passed: its lock and/or its expiry are over.
CREATE FUNCTION age_key(p_scope text, p_key text, lock_over boolean, expired boolean)
RETURNS void LANGUAGE sql AS $$
  UPDATE idem.idempotency_request
     SET locked_until = CASE WHEN lock_over AND status = 'processing'
                             THEN now() - interval '1 second' ELSE locked_until END,
         created_at = CASE WHEN expired THEN now() - interval '2 days' ELSE created_at END,
         expires_at = CASE WHEN expired THEN now() - interval '1 second' ELSE expires_at END
   WHERE scope = p_scope AND key = p_key;
$$;
