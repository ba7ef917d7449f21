-- The floor peer: no functions at all, only a table of idem's shape (same
-- columns, constraints and indexes) and a fence sequence. A client that
-- wanted the least work per request would send the plain statements in
-- bench/workloads/*_floor.sql against it: an INSERT ... ON CONFLICT DO NOTHING
-- RETURNING to claim, an UPDATE by primary key to record the outcome.
-- Whatever idem adds on top of that (classification, fencing checks, the
-- function call) is what the floor ratio measures.

CREATE SCHEMA floor;
CREATE SEQUENCE floor.fence_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE floor.idempotency_request (LIKE idem.idempotency_request INCLUDING ALL);
