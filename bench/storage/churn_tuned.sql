-- A what-if for bench/churn.sh (CHURN_STORAGE=bench/storage/churn_tuned.sql):
-- autovacuum visits the churned tables after 1% of their rows died instead
-- of 20%, and works unthrottled there, so the space of purged rows is free
-- again well within a retention period instead of after a large share of the table died.
ALTER TABLE idem.idempotency_request SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE idem.consumed_message SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE idem.outbox_event SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
