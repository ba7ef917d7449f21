-- Byte-identical replays: mark_succeeded_returning / mark_failed_returning
-- give the application the stored answer exactly as every replay of the key
-- will carry it.
SELECT fence FROM idem.claim_idempotency_key('bytes', 'k1', 'h') \gset

-- What the application built: its own spacing, key order and number form.
\set built '{"total":12.50, "id":7,"items":[ 1e2, "x" ]}'
SELECT kind, fence IS NULL AS no_fence, response_code, response_body::text AS first_answer
  FROM idem.mark_succeeded_returning('bytes', 'k1', :fence, 201, :'built') \gset first_
SELECT :'first_kind' AS kind, :'first_no_fence' AS no_fence, :'first_response_code' AS code,
       :'first_first_answer' AS first_answer;
-- Sending what it built would differ from the replays; the stored answer does not.
SELECT :'built' = :'first_first_answer' AS built_equals_stored;
SELECT kind, response_code, response_body::text = :'first_first_answer' AS replay_same_bytes
  FROM idem.claim_idempotency_key('bytes', 'k1', 'h');
SELECT convert_to(response_body::text, 'UTF8') = convert_to(:'first_first_answer', 'UTF8')
       AS same_octets
  FROM idem.claim_idempotency_key('bytes', 'k1', 'h');

-- A final failure: the same, as final_failure.
SELECT fence FROM idem.claim_idempotency_key('bytes', 'k2', 'h') \gset
SELECT kind, fence, failure_code, failure_message, response_code, response_body::text AS first_answer
  FROM idem.mark_failed_returning('bytes', 'k2', :fence, false, 'card_declined', 'declined',
                                  402, '{"error" : "card_declined"}') \gset first_
SELECT :'first_kind' AS kind, :'first_failure_code' AS failure_code, :'first_first_answer' AS first_answer;
SELECT kind, response_body::text = :'first_first_answer' AS replay_same_bytes
  FROM idem.claim_idempotency_key('bytes', 'k2', 'h');

-- A retryable failure: a retry takes the key over; this call grants nothing.
SELECT fence FROM idem.claim_idempotency_key('bytes', 'k3', 'h') \gset
SELECT kind, fence, failure_code FROM idem.mark_failed_returning('bytes', 'k3', :fence, true, 'timeout');
SELECT kind, fence > :fence AS newer_fence FROM idem.claim_idempotency_key('bytes', 'k3', 'h');

-- The fence is checked as by mark_succeeded: a stale one is refused.
\set VERBOSITY terse
SELECT idem.mark_succeeded_returning('bytes', 'k3', :fence, 200);
\set VERBOSITY default
