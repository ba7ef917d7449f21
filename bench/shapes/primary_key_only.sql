-- Shape for bench/run (BENCH_SHAPE) and bench/lifecycle_instructions.sh
-- (SHAPE): a what-if, not a shape idem ships. idem's key table keeps only
-- its primary key, bare's index set (bench/bare/schema.sql): no sweep and
-- no purge index, so the mark is HOT and a lifecycle writes one index
-- entry. Sweeping or purging the table is then a full scan. It bounds what
-- any choice of maintenance indexes could give the new key against bare:
-- what is left is the function layer and the row rules' CHECK
-- (bench/README.md, "A HOT mark: what it buys and what it would cost").
DROP INDEX idem.idempotency_request_sweep_idx, idem.idempotency_request_purge_idx;
