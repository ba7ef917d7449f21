-- Shape for bench/lifecycle_instructions.sh: the key table with no CHECK
-- constraint at all (NOT NULLs only), the baseline the other shapes are
-- measured against. Not a shape idem could ship: nothing would refuse a
-- hand-written row that breaks an invariant.
ALTER TABLE idem.idempotency_request DROP CONSTRAINT idempotency_request_invariants;
