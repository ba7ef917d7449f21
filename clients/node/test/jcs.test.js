// The fingerprint made here equals the server's idem.request_hash for the
// same document: RFC 8785 member order (UTF-16 code units), ECMAScript
// number forms, string escapes; and what the server refuses (P4005) is
// refused here too.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { requestHash, canonicalText } = require('..');
const { makePool } = require('./helpers');

const pool = makePool(2);
test.after(() => pool.end());

const documents = [
  '{}', '[]', 'null', 'true', 'false', '0', '-0', '1', '-1', '1.0', '0.1', '-0.0000001', '1e-7', '1e-6',
  '1234567890123456', '9007199254740992', '1e21', '1e20', '123e18', '1.5e300', '5e-324', '1.7976931348623157e308',
  '0.30000000000000004', '100.50', '2.5E+3', '-1.25e-10',
  '"plain"', '"\\u0001\\u001f\\u007f"', '"tab\\tnew\\nline\\r\\b\\f"', '"\\"quoted\\" \\\\ back"', '"\\/slash"',
  '"€ \\u20ac 😀 \\ud83d\\ude00"', '"\\u00e9 é"', '"<>&\'"', '"\\u2028\\u2029"',
  '{"b": 1, "a": 2, "c": {"z": [3, 2, 1], "y": null}}',
  // RFC 8785 3.2.3: order by UTF-16 code units, not code points.
  '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
  '{"numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]}',
  '{"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/"}',
  '{"literals": [null, true, false]}',
  '{"a": {"a": {"a": {"a": [[[[]]]]}}}}',
  '{"dup": 1, "dup": 2}',
  '  { "spaced" :\t[ 1 ,\n 2 ] }  ',
  '{"aa": 1, "a": 2, "A": 3, "": 4, "a\\u0001": 5}',
];

test('the fingerprint equals idem.request_hash for every document', async () => {
  for (const doc of documents) {
    const { rows } = await pool.query('SELECT idem.request_hash($1::jsonb) AS h', [doc]);
    assert.equal(requestHash(doc), rows[0].h, `document ${doc} (canonical here: ${canonicalText(doc)})`);
  }
});

test('RFC 8785 examples: member order and number forms', () => {
  assert.equal(canonicalText('{"\\u20ac":1,"\\r":2,"\\ufb33":3,"1":4,"\\ud83d\\ude00":5,"\\u0080":6,"\\u00f6":7}'),
    '{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\ud83d\ude00":5,"\ufb33":3}');
  // (333333333.33333329 of the RFC's example is not exact: idem refuses it, below.)
  assert.equal(canonicalText('[333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]'),
    '[333333333.3333333,1e+30,4.5,0.002,1e-27]');
  assert.equal(canonicalText('"\\u000f\\u000a"'), '"\\u000f\\n"');
});

test('numbers the server refuses are refused here with the same SQLSTATE', async () => {
  for (const doc of ['12345678901234567890', '123456789012345678', '9007199254740993', '333333333.33333329',
    '{"amount": 0.1000000000000000000001}', '[1e400]', '-1e-400', '9007199254740993.5']) {
    const server = await pool.query('SELECT idem.request_hash($1::jsonb)', [doc]).then(() => 'accepted', (e) => e.code);
    let here;
    try { requestHash(doc); here = 'accepted'; } catch (error) { here = error.code; }
    assert.equal(here, server, `document ${doc}`);
  }
});
