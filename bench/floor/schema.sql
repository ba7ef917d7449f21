-- The floor peer: no functions at all, only a table of idem's shape (same
-- columns, constraints and indexes) and a fence sequence. A client that
-- wanted the least work per request would send the plain statements in
-- bench/workloads/*_floor.sql against it: an INSERT ... ON CONFLICT DO NOTHING
-- RETURNING to claim, an UPDATE by primary key to record the outcome.
-- Whatever idem adds on top of that (classification, fencing checks, the
-- function call) is what the floor ratio measures.
-- LIKE ... INCLUDING ALL copies the constraints too: since idem 1.1 that is
-- NOT NULL on the columns and one CHECK calling idem.request_invariants_hold()
-- (the C function that enforces 1.0's thirteen rules), so the floor pays for
-- its invariants exactly what idem pays, and needs idem installed.

CREATE SCHEMA floor;
CREATE SEQUENCE floor.fence_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE floor.idempotency_request (LIKE idem.idempotency_request INCLUDING ALL);
