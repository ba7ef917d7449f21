-- The floor peer: no functions at all, only a table of idem's shape (same
-- columns, constraints and indexes) and a fence sequence. A client that
-- wanted the least work per request would send the plain statements in
-- bench/workloads/*_floor.sql against it: an INSERT ... ON CONFLICT DO NOTHING
-- RETURNING to claim, an UPDATE by primary key to record the outcome.
-- Whatever idem adds on top of that (classification, fencing checks, the
-- function call) is what the floor ratio measures.
-- The table has idem's columns, NOT NULLs and indexes, and the same rules as
-- thirteen plain-SQL CHECK constraints (bench/plain_invariants.sql): what a
-- client without idem's C function must write to keep the same invariants.

CREATE SCHEMA floor;
CREATE SEQUENCE floor.fence_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE floor.idempotency_request
    (LIKE idem.idempotency_request INCLUDING ALL EXCLUDING CONSTRAINTS);
\set invariants_table floor.idempotency_request
\ir ../plain_invariants.sql
