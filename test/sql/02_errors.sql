-- Every SQLSTATE of the contract, each with message, detail and hint.

-- P4000: scope missing, empty or too long
SELECT error_of($$SELECT idem.claim_idempotency_key(NULL, 'k', 'h')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('', 'k', 'h')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key(repeat('s', 256), 'k', 'h')$$) LIKE 'P4000: idempotency scope is longer than 255 characters%' AS long_scope;
SELECT error_of($$SELECT idem.mark_succeeded(NULL, 'k', 1, 200)$$);

-- P4001: key missing, empty, or longer than 255 characters
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', NULL, 'h')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', '', 'h')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', repeat('x', 256), 'h')$$) ~ '^P4001: the Idempotency-Key is longer than 255 characters\n  detail: scope "orders", key "x+"\n' AS long_key;
SELECT error_of($$SELECT idem.set_recovery_point('orders', '', 1, 'x')$$);

-- P4002: same key, different request
SELECT kind FROM idem.claim_idempotency_key('errors', 'paid', 'hash-a');
SELECT error_of($$SELECT idem.claim_idempotency_key('errors', 'paid', 'hash-b')$$);
-- ...checked before anything else: also while processing, also for a stale key
SELECT age_key('errors', 'paid', lock_over => true, expired => false);
SELECT error_of($$SELECT idem.claim_idempotency_key('errors', 'paid', 'hash-b')$$) LIKE 'P4002:%' AS stale_mismatch;
SELECT status, request_hash, attempt_count FROM idem.idempotency_request WHERE scope = 'errors' AND key = 'paid';

-- P4003: request hash missing or empty
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', NULL)$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', '')$$);

-- P4004: bad arguments
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', 'h', NULL, interval '0 s')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', 'h', NULL, interval '-5 min')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', 'h', NULL, interval '1 month -31 days')$$);
SELECT error_of($$SELECT idem.claim_idempotency_key('orders', 'k', 'h', NULL, NULL, interval '0 s')$$);
-- Positive on the calendar, not by 30-day months: '-1 mon 28 days' never
-- ends after now, '1 mon -27 days' always does, and '-1 mon 31 days' depends
-- on last month's length but is never let through to violate a CHECK.
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('orders', 'k', 'h', NULL, interval '-1 mon 28 days')$$), ':', 1) AS never_positive,
       split_part(error_of($$SELECT idem.claim_idempotency_key('orders', 'cal', 'h', NULL, interval '1 mon -27 days')$$), ':', 1) AS always_positive,
       split_part(error_of($$SELECT idem.claim_idempotency_key('orders', 'cal', 'h', NULL, NULL, interval '-1 mon 31 days')$$), ':', 1)
         IN ('P4004', 'no error') AS month_dependent_is_clean;
SELECT error_of($$SELECT idem.purge_expired(0)$$);
SELECT error_of($$SELECT idem.sweep_stale(-1)$$);
SELECT error_of($$SELECT idem.purge_expired(NULL)$$);
SELECT error_of($$SELECT idem.mark_succeeded('orders', 'k', NULL, 200)$$);
SELECT error_of($$SELECT idem.mark_succeeded('orders', 'k', 0, 200)$$);
SELECT error_of($$SELECT idem.mark_succeeded('orders', 'k', 1, NULL)$$);
SELECT error_of($$SELECT idem.mark_succeeded('orders', 'k', 1, 99)$$);
SELECT error_of($$SELECT idem.mark_failed('orders', 'k', 1, NULL, 'code')$$);
SELECT error_of($$SELECT idem.mark_failed('orders', 'k', 1, true, '')$$);
SELECT error_of($$SELECT idem.mark_failed('orders', 'k', 1, true, NULL)$$);
SELECT error_of($$SELECT idem.mark_failed('orders', 'k', 1, true, 'code', NULL, 600)$$);
SELECT error_of($$SELECT idem.set_recovery_point('orders', 'k', 1, '')$$);
SELECT error_of($$SELECT idem.set_recovery_point('orders', 'k', 1, NULL)$$);
SELECT error_of($$SELECT idem.set_recovery_point('orders', 'k', 1, 'finished')$$);

-- P4005: a number that cannot be fingerprinted exactly
SELECT error_of($$SELECT idem.request_hash('{"amount": 12345678901234567890}'::jsonb)$$);

-- P4010 / P4011 / P4013: the key does not exist, or is not owned
SELECT error_of($$SELECT idem.mark_succeeded('errors', 'nobody', 1, 200)$$);
SELECT error_of($$SELECT idem.mark_failed('errors', 'nobody', 1, true, 'oops')$$);
SELECT error_of($$SELECT idem.set_recovery_point('errors', 'nobody', 1, 'step')$$);
SELECT fence AS done_fence FROM idem.claim_idempotency_key('errors', 'done', 'h') \gset
SELECT idem.mark_succeeded('errors', 'done', :done_fence, 200);
SELECT regexp_replace(error_of(format($$SELECT idem.mark_succeeded('errors', 'done', %s, 200)$$, :done_fence)), 'fence \d+', 'fence N', 'g');
SELECT regexp_replace(error_of(format($$SELECT idem.mark_failed('errors', 'done', %s, false, 'late')$$, :done_fence)), 'fence \d+', 'fence N', 'g');
SELECT regexp_replace(error_of(format($$SELECT idem.set_recovery_point('errors', 'done', %s, 'late')$$, :done_fence)), 'fence \d+', 'fence N', 'g');
-- A fence that was never issued for this key owns nothing either.
SELECT fence AS open_fence FROM idem.claim_idempotency_key('errors', 'open', 'h') \gset
SELECT error_of(format($$SELECT idem.mark_succeeded('errors', 'open', %s, 200)$$, :open_fence + 1000)) LIKE 'P4010: mark_succeeded: idempotency key is not owned by this fence%' AS invented_fence;

-- P4012: a stale fence after a takeover
SELECT age_key('errors', 'open', lock_over => true, expired => false);
SELECT fence AS taker_fence FROM idem.claim_idempotency_key('errors', 'open', 'h') \gset
SELECT regexp_replace(error_of(format($$SELECT idem.mark_succeeded('errors', 'open', %s, 200)$$, :open_fence)), 'fence \d+', 'fence N', 'g');
SELECT error_of(format($$SELECT idem.mark_failed('errors', 'open', %s, true, 'x')$$, :open_fence)) LIKE 'P4012:%' AS mark_failed_stale;
SELECT error_of(format($$SELECT idem.set_recovery_point('errors', 'open', %s, 'x')$$, :open_fence)) LIKE 'P4012:%' AS checkpoint_stale;
SELECT error_of(format($$SELECT idem.mark_succeeded('errors', 'open', %s, 200)$$, :taker_fence));

-- Settings are validated too.
SELECT error_of($$SET idem.lock_timeout = 0$$);
SELECT error_of($$SET idem.retention = 0$$);
