-- A what-if for bench/churn.sh (CHURN_STORAGE=bench/storage/churn_no_truncate.sql):
-- vacuum does not give the churned tables' emptied tail back to the file
-- system. In a table whose rows are all replaced once a retention, a tail
-- that vacuum truncates is extended again within seconds, and the
-- truncation itself holds an ACCESS EXCLUSIVE lock on the table (every
-- claim waits) and is replayed on standbys the same way.
ALTER TABLE idem.idempotency_request SET (vacuum_truncate = false);
ALTER TABLE idem.consumed_message SET (vacuum_truncate = false);
ALTER TABLE idem.outbox_event SET (vacuum_truncate = false);
