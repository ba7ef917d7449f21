-- A what-if for bench/churn.sh (CHURN_STORAGE=bench/storage/churn_tuned.sql):
-- autovacuum visits the churned tables once 1% of their rows died instead of
-- 20%, so the space of purged rows is free again for new ones well within
-- a retention period, instead of after a fifth of the table died. Its pace
-- (cost delay and limit) stays as shipped.
ALTER TABLE idem.idempotency_request SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE idem.consumed_message SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE idem.outbox_event SET (autovacuum_vacuum_scale_factor = 0.01);
