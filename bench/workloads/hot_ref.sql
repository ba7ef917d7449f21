-- hot keys (ref): every client on the same 16 keys. Claim; if you won the
-- key, record a retryable failure so that the next claim can take it over
-- again (a succeeded key would only replay from then on).
\set k random(1, 16)
SELECT kind, coalesce(fence, 0) AS fence FROM ref.claim_idempotency_key('hot', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c') \gset
\if :fence > 0
SELECT ref.mark_failed('hot', :k, :fence, true, 'try_again');
\endif
