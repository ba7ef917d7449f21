-- request_hash(jsonb) is SHA-256 of the RFC 8785 canonical text; Postgres's
-- own sha256() of the canonical text written by hand is the oracle.
SELECT input, canonical, idem.request_hash(input::jsonb) = encode(sha256(convert_to(canonical, 'UTF8')), 'hex') AS matches
  FROM (VALUES
    ('{"b": 2, "a": 1}', '{"a":1,"b":2}'),
    ('{ "a" : [ 1 , 2.0 , 3e0 ] }', '{"a":[1,2,3]}'),
    ('1.0', '1'),
    ('1e21', '1e+21'),
    ('1e20', '100000000000000000000'),
    ('0.000001', '0.000001'),
    ('0.0000001', '1e-7'),
    ('-0', '0'),
    ('0.1', '0.1'),
    ('123.4500', '123.45'),
    ('5e-324', '5e-324'),
    ('"\u20ac\n\t\u0001\"\\/"', E'"\u20ac\\n\\t\\u0001\\"\\\\/"'),
    ('{"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7}',
     E'{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\U0001F600":5,"\ufb33":3}'),
    ('[null, true, false, {}, []]', '[null,true,false,{},[]]'),
    ('{"nested": {"z": [{"y": 1, "x": 2}], "a": null}}', '{"nested":{"a":null,"z":[{"x":2,"y":1}]}}')
  ) AS t(input, canonical);

-- Equal documents, differently written, share one fingerprint.
SELECT idem.request_hash('{"amount": 100, "currency": "EUR"}'::jsonb)
     = idem.request_hash('{"currency":"EUR",   "amount":1e2}'::jsonb) AS same_fingerprint;
-- Different amounts never do: 0.10000000000000001 would round to the double
-- written 0.1, so it is refused rather than given 0.1's fingerprint.
SELECT idem.request_hash('{"amount": 0.1}'::jsonb) <> idem.request_hash('{"amount": 0.2}'::jsonb) AS distinct_amounts;
SELECT split_part(error_of($$SELECT idem.request_hash('{"amount": 0.10000000000000001}'::jsonb)$$), ':', 1) AS near_tenth;

-- Numbers a double cannot hold exactly are refused (P4005): send them as strings.
SELECT error_of(format($$SELECT idem.request_hash(%L::jsonb)$$, n)) AS refused
  FROM unnest(ARRAY['12345678901234567890', '9007199254740993', '0.10000000000000000001',
                    '1e400', '1e-400', '{"a": [1, 2, 3.00000000000000000001]}']) AS n;
SELECT idem.request_hash('{"amount": "12345678901234567890"}'::jsonb) IS NOT NULL AS string_amount_ok;

-- bytea: SHA-256 of the raw bytes.
SELECT idem.request_hash('\x'::bytea) = encode(sha256(''::bytea), 'hex') AS empty_bytes,
       idem.request_hash(convert_to('POST /v1/charges amount=100', 'UTF8'))
         = encode(sha256(convert_to('POST /v1/charges amount=100', 'UTF8')), 'hex') AS raw_bytes;
SELECT idem.request_hash('\x'::bytea);
-- NULL in, NULL out (then the claim refuses it with P4003).
SELECT idem.request_hash(NULL::jsonb) IS NULL AS null_jsonb, idem.request_hash(NULL::bytea) IS NULL AS null_bytea;
SELECT error_of($$SELECT idem.claim_idempotency_key('s', 'k', idem.request_hash(NULL::jsonb))$$) LIKE 'P4003:%' AS null_hash_refused;
