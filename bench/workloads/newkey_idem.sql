-- new-key lifecycle (idem): claim a key never seen before, then record its
-- outcome, as two transactions like a real request. Keys are random 63-bit
-- numbers: a repeat within a run is practically impossible.
\set k random(1, 9000000000000000000)
SELECT kind, fence FROM idem.claim_idempotency_key('newkey', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c') \gset
SELECT idem.mark_succeeded('newkey', :k, :fence, 201, '{"id": 1}');
