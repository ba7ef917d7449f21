-- Shape for bench/run (BENCH_SHAPE) and bench/lifecycle_instructions.sh
-- (SHAPE): a what-if, not a shape idem ships. The sweep and purge indexes
-- are rebuilt on columns no outcome changes, without a predicate, so that
-- mark_succeeded is a HOT update as bare's is: the sweep's index keyed on
-- claimed_at (set by a claim, left alone by the mark) and the purge's on
-- expires_at alone. It measures what a HOT mark would buy on the new key.
-- What it gives up: the sweep can no longer read only in-flight keys (every
-- key whose claim is older than the lock stays in its index range until
-- purged), so a sweep without a full scan would need a horizon it keeps
-- across rounds (bench/README.md, "A HOT mark: what it buys and what it
-- would cost").
DROP INDEX idem.idempotency_request_sweep_idx, idem.idempotency_request_purge_idx;
CREATE INDEX idempotency_request_claimed_idx ON idem.idempotency_request (claimed_at);
CREATE INDEX idempotency_request_expiry_idx ON idem.idempotency_request (expires_at);
