-- One rule for every interval idem accepts (src/pure/interval_rule.hpp): finite,
-- and positive from every moment, a month counting as 28 days when added
-- and 31 when subtracted, a day as 24 hours less an hour for a
-- daylight-saving change. Intervals that PostgreSQL's '> 0' (30-day months)
-- calls positive but that end at or before now after some months are
-- refused everywhere with P4004 (and by idem.scope_policy's CHECKs), never
-- let through to fail idem's own INSERT with 23514 or to grant a lease that
-- is over when granted.
\set VERBOSITY default
\set SHOW_CONTEXT never

-- The rule, directly.
SELECT v, idem.interval_is_positive(v::interval) AS positive,
       idem.interval_is_positive(v::interval, true) AS not_negative,
       v::interval > '0'::interval AS postgres_says_positive
  FROM (VALUES ('1 second'), ('1 mon'), ('1 mon -27 days'), ('1 day -22 hours'),
               ('0'), ('1 mon -28 days'), ('1 day -23 hours'),
               ('-1 mon 31 days'), ('-1 mon 30 days 1 hour'), ('1 mon -31 days'),
               ('-1 mon 28 days'), ('-1 day 25 hours'), ('-1 second'),
               ('178000000 years'), ('-178000000 years 1 day')) AS t(v);
SELECT idem.interval_is_positive(NULL) IS NULL AS null_is_not_set_here;

-- Every interval argument, with values each validator used to disagree on.
CREATE TEMP TABLE bad_interval (ord int, v text);
INSERT INTO bad_interval VALUES (1, '-1 mon 31 days'), (2, '-1 mon 30 days 1 hour'),
  (3, '1 mon -31 days'), (4, '-1 mon 28 days'), (5, '1 day -23 hours'), (6, '0'),
  (7, '-1 second');

SELECT fence AS iv_fence FROM idem.claim_idempotency_key('iv', 'owned', 'h') \gset
SELECT idem.outbox_put('iv', 'event', 'iv.test', '{}') AS iv_event \gset

CREATE TEMP TABLE interval_call (ord int, what text, call text);
INSERT INTO interval_call VALUES
  (1, 'claim lock_timeout', $$SELECT idem.claim_idempotency_key('iv', 'k1', 'h', NULL, %L::interval)$$),
  (2, 'claim retention', $$SELECT idem.claim_idempotency_key('iv', 'k2', 'h', NULL, NULL, %L::interval)$$),
  (3, 'claim_or_wait max_wait', $$SELECT idem.claim_or_wait('iv', 'k3', 'h', %L::interval)$$),
  (4, 'claim_or_wait lock_timeout', $$SELECT idem.claim_or_wait('iv', 'k4', 'h', '1 s', NULL, %L::interval)$$),
  (5, 'claim_or_wait retention', $$SELECT idem.claim_or_wait('iv', 'k5', 'h', '1 s', NULL, NULL, %L::interval)$$),
  (6, 'extend_lock extend_by', format($$SELECT idem.extend_lock('iv', 'owned', %s, %%L::interval)$$, :iv_fence)),
  (7, 'consume_once retention', $$SELECT idem.consume_once('iv', 'm1', 'h', %L::interval)$$),
  (8, 'outbox_lease lease', $$SELECT idem.outbox_lease(10, %L::interval, ARRAY['iv.test'])$$),
  (9, 'scope_policy lock_timeout', $$INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('iv-' || md5(%1$L), %1$L)$$),
  (10, 'scope_policy retention', $$INSERT INTO idem.scope_policy (scope, retention) VALUES ('iv-' || md5(%1$L), %1$L)$$),
  (11, 'scope_policy completer_delay', $$INSERT INTO idem.scope_policy (scope, completer_delay) VALUES ('iv-' || md5(%1$L), %1$L)$$);

-- One SQLSTATE per bad value, in bad_interval's order.
SELECT c.what, string_agg(split_part(error_of(format(c.call, b.v)), ':', 1), ' ' ORDER BY b.ord) AS states
  FROM interval_call c CROSS JOIN bad_interval b
 GROUP BY c.ord, c.what ORDER BY c.ord;

-- outbox_failed's retry_after may be zero (retry at once), not negative:
-- the same rule, or_zero.
-- (A lease that was over when granted would let this lease take the event again.)
SELECT lease_fence AS iv_lease FROM idem.outbox_lease(10, '1 hour', ARRAY['iv.test']) \gset
SELECT v, split_part(error_of(format($$SELECT idem.outbox_failed(%s, %s, 'boom', %L::interval)$$,
                                     :iv_event, :iv_lease, v)), ':', 1) AS state
  FROM (VALUES ('-1 mon 30 days 1 hour'), ('1 mon -31 days'), ('-1 mon 28 days'),
               ('1 day -25 hours'), ('-1 second')) AS t(v);
-- The event is still leased under its fence: no bad retry_after got through.
SELECT status, lease_fence = :iv_lease AS same_lease FROM idem.outbox_event WHERE id = :iv_event;
-- Never negative, though it may be nothing: accepted.
SELECT error_of(format($$SELECT idem.outbox_failed(%s, %s, 'boom', '-1 mon 31 days')$$, :iv_event, :iv_lease)) AS zero_or_more;

-- The messages stay each call's own.
SELECT error_of($$SELECT idem.claim_idempotency_key('iv', 'k1', 'h', NULL, '-1 mon 31 days')$$);
SELECT error_of($$SELECT idem.consume_once('iv', 'm1', 'h', '-1 mon 31 days')$$);
SELECT error_of($$SELECT idem.outbox_lease(10, '-1 mon 30 days 1 hour')$$);

-- Values that move every moment forward are accepted everywhere.
SELECT kind FROM idem.claim_idempotency_key('iv', 'good', 'h', NULL, '1 mon -27 days', '1 day -22 hours');
SELECT idem.consume_once('iv', 'good', 'h', '1 mon -27 days') AS consumed;
INSERT INTO idem.scope_policy (scope, lock_timeout, retention, completer_delay)
VALUES ('iv-good', '1 mon -27 days', '1 day -22 hours', '1 second');
SELECT count(*) AS policies_written FROM idem.scope_policy WHERE scope LIKE 'iv-%';
DELETE FROM idem.scope_policy WHERE scope LIKE 'iv-%';
