-- The library checks the shape of every row type it fills before it forms a
-- row: a library and an extension script that disagree (a half-done
-- upgrade, a hand-made declaration) get an internal error (P4099), never a
-- row formed past the end of an array or of the wrong types. The C symbols
-- are declared here again with other result types.
CREATE TYPE pg_temp.short_claim AS (kind idem.claim_kind, fence bigint);
CREATE FUNCTION pg_temp.claim_short(text, text, text, text DEFAULT NULL,
    interval DEFAULT NULL, interval DEFAULT NULL) RETURNS pg_temp.short_claim
  AS '$libdir/idem', 'idem_claim_idempotency_key' LANGUAGE C;
SELECT error_of($$SELECT pg_temp.claim_short('mismatch', 'k', 'h')$$) AS fewer_columns;

-- As many columns as idem.claim, one of another type (text for jsonb).
CREATE TYPE pg_temp.text_body_claim AS (kind idem.claim_kind, fence bigint,
    attempt_count int, recovery_point text, response_code int, response_body text,
    result_ref_type text, result_ref_id text, failure_code text, failure_message text,
    locked_until timestamptz, expires_at timestamptz);
CREATE FUNCTION pg_temp.claim_text_body(text, text, text, text DEFAULT NULL,
    interval DEFAULT NULL, interval DEFAULT NULL) RETURNS pg_temp.text_body_claim
  AS '$libdir/idem', 'idem_claim_idempotency_key' LANGUAGE C;
SELECT error_of($$SELECT pg_temp.claim_text_body('mismatch', 'k', 'h')$$) AS wrong_type;

-- Neither wrote anything; the real declaration works on the same key.
SELECT count(*) AS rows_written FROM idem.idempotency_request WHERE scope = 'mismatch';
SELECT kind FROM idem.claim_idempotency_key('mismatch', 'k', 'h');

-- The set-returning functions over shared memory (idem is preloaded here).
CREATE FUNCTION pg_temp.worker_status_short(OUT database name, OUT pid integer)
  RETURNS SETOF record AS '$libdir/idem', 'idem_worker_status' LANGUAGE C;
SELECT error_of($$SELECT * FROM pg_temp.worker_status_short()$$) AS worker_status_short;
CREATE FUNCTION pg_temp.stats_counters_short(OUT datid oid, OUT new_claim bigint)
  RETURNS SETOF record AS '$libdir/idem', 'idem_stats_counters' LANGUAGE C;
SELECT error_of($$SELECT * FROM pg_temp.stats_counters_short()$$) AS stats_counters_short;
