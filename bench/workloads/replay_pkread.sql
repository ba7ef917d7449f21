-- replay (pkread): one bare primary-key SELECT of the stored response from
-- idem's own table, and nothing else: the least work any store can do to
-- answer a retry (no hash check, no expiry, no classification).
\set k random(1, 200000)
SELECT response_code, response_body FROM idem.idempotency_request WHERE scope = 'replay' AND key = :k::text;
