-- replay (ref): claim one of 200,000 keys that already succeeded; the
-- answer is the stored response.
\set k random(1, 200000)
SELECT kind, response_code, response_body FROM ref.claim_idempotency_key('replay', :k, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c');
