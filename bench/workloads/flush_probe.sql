-- The cost of one WAL flush: a transaction whose only WAL is one small
-- transactional record and its commit record. Run with synchronous_commit
-- on and off; the difference of the latencies is the flush.
SELECT pg_catalog.pg_logical_emit_message(true, 'idem-bench', '');
