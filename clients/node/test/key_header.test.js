// The Idempotency-Key header read as every idem package reads it: the cases
// of clients/conformance/idempotency-key.json, which the Python package's
// tests read too (IDEM_KEY_VECTORS names it; test/extra.d/node_package.sh
// sets it).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { parseKey } = require('../lib/express');

const file = process.env.IDEM_KEY_VECTORS;

test('the shared table of cases is there', () => {
  assert.ok(file, 'IDEM_KEY_VECTORS names clients/conformance/idempotency-key.json');
  assert.ok(JSON.parse(fs.readFileSync(file, 'utf8')).cases.length >= 10);
});

for (const c of file ? JSON.parse(fs.readFileSync(file, 'utf8')).cases : []) {
  test(`key header: ${c.name}`, () => {
    assert.equal(parseKey(c.header), c.key);
  });
}
