-- A replay takes no row lock, no transaction id and writes no WAL, so it
-- also works in a READ ONLY transaction (and on a hot standby).
SELECT fence AS f FROM idem.claim_idempotency_key('replay', 'k', 'h') \gset
SELECT idem.mark_succeeded('replay', 'k', :f, 200, '{"ok": true}');
SELECT fence AS f FROM idem.claim_idempotency_key('replay', 'final', 'h') \gset
SELECT idem.mark_failed('replay', 'final', :f, false, 'declined', NULL, 402);
-- Warm up: the first reads after a write may set hint bits.
SELECT kind FROM idem.claim_idempotency_key('replay', 'k', 'h');
SELECT kind FROM idem.claim_idempotency_key('replay', 'final', 'h');

-- The WAL this backend writes (wal_records_of, test/sql/00_install.sql): another
-- process's WAL at the same time cannot make the test fail.
BEGIN;
SELECT kind, response_code FROM idem.claim_idempotency_key('replay', 'k', 'h');
SELECT kind, response_code FROM idem.claim_idempotency_key('replay', 'final', 'h');
SELECT wal_records_of($$SELECT idem.claim_idempotency_key('replay', 'k', 'h')$$) AS replay_wal_records,
       wal_records_of($$SELECT idem.claim_idempotency_key('replay', 'final', 'h')$$) AS final_wal_records;
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
-- No row lock either: nothing in pg_locks for this backend but relation locks.
SELECT count(*) AS row_or_xid_locks FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype IN ('tuple', 'transactionid');
COMMIT;

-- The measurement sees WAL when there is some: a new key writes it.
SELECT wal_records_of($$SELECT idem.claim_idempotency_key('replay', 'wal', 'h')$$) > 0 AS new_key_writes_wal;

-- Nor does it draw a fence from the sequence.
SELECT last_value AS seq_before FROM idem.fence_seq \gset
SELECT kind FROM idem.claim_idempotency_key('replay', 'k', 'h');
SELECT last_value = :seq_before AS no_fence_drawn FROM idem.fence_seq;

-- READ ONLY: replays work, anything that must write says it cannot.
BEGIN READ ONLY;
SELECT kind, response_body FROM idem.claim_idempotency_key('replay', 'k', 'h');
SELECT kind, failure_code FROM idem.claim_idempotency_key('replay', 'final', 'h');
SELECT error_of($$SELECT idem.claim_idempotency_key('replay', 'k', 'other')$$) LIKE 'P4002:%' AS mismatch_still_checked;
SELECT error_of($$SELECT idem.claim_idempotency_key('replay', 'new-key', 'h')$$);
COMMIT;

-- A twin that finds the key processing does not lock it either.
SELECT kind FROM idem.claim_idempotency_key('replay', 'busy', 'h');
BEGIN;
SELECT kind FROM idem.claim_idempotency_key('replay', 'busy', 'h');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
COMMIT;
