-- Bad input never crashes the server nor corrupts a row: every case gets
-- its documented SQLSTATE and a message a person understands.

-- NULL in every argument of every function.
SELECT f, split_part(error_of(f), ':', 1) AS sqlstate FROM unnest(ARRAY[
  $$SELECT idem.claim_idempotency_key(NULL, NULL, NULL, NULL, NULL, NULL)$$,
  $$SELECT idem.claim_idempotency_key('s', 'k', 'h', NULL, NULL, NULL)$$,
  $$SELECT idem.mark_succeeded(NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
  $$SELECT idem.mark_failed(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
  $$SELECT idem.set_recovery_point(NULL, NULL, NULL, NULL)$$,
  $$SELECT idem.purge_expired(NULL)$$,
  $$SELECT idem.sweep_stale(NULL)$$,
  $$SELECT idem.request_hash(NULL::jsonb)$$,
  $$SELECT idem.request_hash(NULL::bytea)$$
]) AS f;

-- Keys at and past the limit, in characters, not bytes.
SELECT kind FROM idem.claim_idempotency_key('bad', repeat('k', 255), 'h');
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('bad', repeat('k', 256), 'h')$$), ':', 1) AS key_256;
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('bad', repeat('€', 256), 'h')$$), ':', 1) AS key_256_multibyte;
-- Control characters are ordinary characters.
SELECT kind FROM idem.claim_idempotency_key('bad', E'tab\there\nnewline', E'h\x01');
-- A 1 MB key is refused quickly, and its message stays short.
SELECT length(error_of(format($$SELECT idem.claim_idempotency_key('bad', %L, 'h')$$, repeat('x', 1000000)))) < 1000 AS short_message;
-- A huge request hash is just text.
SELECT kind FROM idem.claim_idempotency_key('bad', 'big-hash', repeat('h', 100000));

-- Extreme intervals and limits.
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('bad', 'i1', 'h', NULL, interval '-178000000 years')$$), ':', 1) AS very_negative;
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('bad', 'i2', 'h', NULL, interval '178000000 years')$$), ':', 1) AS out_of_range;
SELECT kind, locked_until - now() > interval '999 years' AS long_lock
  FROM idem.claim_idempotency_key('bad', 'i3', 'h', NULL, interval '1000 years');
SELECT kind FROM idem.claim_idempotency_key('bad', 'i4', 'h', NULL, interval '1 microsecond');
SELECT idem.purge_expired(2147483647) >= 0 AS max_limit_ok, idem.sweep_stale(1) >= 0 AS min_limit_ok;
SELECT split_part(error_of($$SELECT idem.purge_expired(-2147483648)$$), ':', 1) AS min_int;

-- JSON: deep nesting, big documents, edge numbers.
SELECT split_part(error_of(format($$SELECT idem.request_hash(%L::jsonb)$$, repeat('[', 1000) || repeat(']', 1000))), ':', 1) AS depth_1000;
SELECT error_of(format($$SELECT idem.request_hash(%L::jsonb)$$, repeat('[', 1001) || repeat(']', 1001))) AS depth_1001;
SELECT split_part(error_of(format($$SELECT idem.request_hash(%L::jsonb)$$, repeat('[', 200000) || repeat(']', 200000))), ':', 1) AS depth_200000;
SELECT length(idem.request_hash(jsonb_build_object('items',
         (SELECT jsonb_agg(jsonb_build_object('sku', 'item-' || g, 'qty', g, 'price', g / 100.0))
            FROM generate_series(1, 100000) g)))) AS hash_of_4mb_document;
SELECT split_part(error_of($$SELECT idem.request_hash('1.7976931348623157e309'::jsonb)$$), ':', 1) AS beyond_double;
SELECT idem.request_hash('1.7976931348623157e308'::jsonb) IS NOT NULL AS max_double_ok,
       idem.request_hash('-5e-324'::jsonb) IS NOT NULL AS min_subnormal_ok;
SELECT split_part(error_of(format($$SELECT idem.request_hash(%L::jsonb)$$, '1' || repeat('0', 400))), ':', 1) AS huge_integer;

-- Oversized or malformed outcomes are refused without touching the row.
SELECT fence AS f FROM idem.claim_idempotency_key('bad', 'outcome', 'h') \gset
SELECT split_part(error_of(format($$SELECT idem.mark_succeeded('bad', 'outcome', %s, 1000)$$, :f)), ':', 1) AS bad_code;
SELECT status, response_code FROM idem.idempotency_request WHERE scope = 'bad' AND key = 'outcome';
SELECT idem.mark_succeeded('bad', 'outcome', :f, 200,
         (SELECT jsonb_agg(g) FROM generate_series(1, 200000) g));
SELECT kind, jsonb_array_length(response_body) FROM idem.claim_idempotency_key('bad', 'outcome', 'h');

-- The server is still up, and every row still satisfies every CHECK.
SELECT count(*) > 0 AS rows_exist FROM idem.idempotency_request WHERE scope = 'bad';
