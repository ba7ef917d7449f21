// The framework-neutral core: the fingerprint equals idem.request_hash, the
// envelope round-trips, and the session binding turns itself off where it
// cannot hold (a transaction pooler between the claim and the outcome, a
// server that refuses to bind), with one warning.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const express = require('express');
const { idempotency } = require('..');
const { fingerprint, pathOf } = require('../lib/http_core');
const answer = require('../lib/answer');
const { makePool, scopeFor, listen, post, effects } = require('./helpers');

const pool = makePool(10);
test.after(() => pool.end());

test('the fingerprint is idem.request_hash: jsonb for JSON types, bytea for the rest', async () => {
  const cases = [
    ['application/json', '{"b": 1.0, "a": [true, null]}'],
    ['application/problem+json; charset=utf-8', '{"x": "\u00e9"}'],
    ['text/plain', '{"b": 1.0}'],
    [undefined, 'a=1&b=2'],
    ['application/json', ''],
    ['application/octet-stream', Buffer.from([0, 255, 10])],
  ];
  for (const [type, body] of cases) {
    const bytes = Buffer.from(body);
    const json = bytes.length > 0 && /json/.test(type || '');
    const { rows: [row] } = await pool.query(
      json ? 'SELECT idem.request_hash($1::jsonb) AS h' : 'SELECT idem.request_hash($1::bytea) AS h',
      [json ? bytes.toString('utf8') : bytes]);
    assert.equal(fingerprint(type, bytes), row.h, `${type}: ${bytes.toString('hex')}`);
  }
});

test('the default scope takes the path as sent, without the query', () => {
  assert.equal(pathOf('/v1/accounts/a%20b/charges?x=1'), '/v1/accounts/a%20b/charges');
  assert.equal(pathOf('/orders'), '/orders');
});

test('the envelope: text as a string, other bytes as base64, headers in order; legacy JSON', () => {
  const allowed = answer.allowList(['X-Order-Id']);
  const headers = answer.pickHeaders({ 'content-type': 'text/plain', 'x-order-id': 7, 'set-cookie': ['a', 'b'], 'content-length': '3', location: '/o/7' }, allowed);
  assert.deepEqual(headers, [['content-type', 'text/plain'], ['x-order-id', '7'], ['location', '/o/7']]);
  const text = answer.encode(headers, Buffer.from('héllo'));
  assert.deepEqual(JSON.parse(text), { idem_http: 1, headers, body: 'héllo' });
  assert.deepEqual(answer.decode(text).body, Buffer.from('héllo'));
  for (const bytes of [Buffer.from([0xc3]), Buffer.from('a\u0000b')]) {
    const stored = JSON.parse(answer.encode([], bytes));
    assert.equal(stored.body, undefined);
    assert.deepEqual(answer.decode(JSON.stringify(stored)).body, bytes);
  }
  assert.deepEqual(answer.decode('{"a": 1}'), { headers: [['content-type', 'application/json']], body: Buffer.from('{"a": 1}') });
  assert.deepEqual(answer.decode(null), { headers: [], body: Buffer.alloc(0) });
  assert.throws(() => answer.decode('{"idem_http": 2}'), answer.NewerEnvelopeError);
  for (const bad of ['{"idem_http": 1, "headers": [["a"]], "body": ""}', '{"idem_http": 1, "headers": []}',
    '{"idem_http": 1, "headers": [], "body": "", "body_base64": ""}', '{"idem_http": 1, "body": 5}',
    '{"idem_http": 1, "body_base64": "not base64!"}']) {
    assert.throws(() => answer.decode(bad), answer.BadEnvelopeError, bad);
  }
});

// A transaction pooler in miniature: the claim (autocommit) runs on one
// server session, the handler's transaction on another.
function poolerPool(real, claims) {
  return {
    async connect() {
      const outside = await real.connect();
      const inside = await real.connect();
      let inTransaction = false;
      return {
        query(sql, args) {
          if (/^BEGIN/.test(sql)) inTransaction = true;
          const on = inTransaction ? inside : outside;
          if (/^(COMMIT|ROLLBACK)/.test(sql)) inTransaction = false;
          if (/idem\.claim_/.test(sql)) claims.push(/bind_lock_to_session/.test(sql));
          return on.query(sql, args);
        },
        release(error) { outside.release(error); inside.release(error); },
      };
    },
  };
}

function ordersApp(options, scope) {
  const app = express();
  app.post('/orders', idempotency({ scope, ...options }), async (req, res) => {
    const { rows } = await req.idem.client.query(
      'INSERT INTO node_test.effects (scope, key) VALUES ($1, $2) RETURNING id', [scope, req.idem.key]);
    res.status(201).json({ id: Number(rows[0].id) });
  });
  return app;
}

test('behind a pooler (the outcome on another server process) the binding stops, with one warning', async () => {
  const scope = scopeFor('pooler');
  const claims = [];
  const warnings = [];
  const logger = { warn: (m) => warnings.push(m), error: console.error };
  const server = await listen(ordersApp({ pool: poolerPool(pool, claims), logger }, scope));
  try {
    for (const key of ['k1', 'k2', 'k3']) assert.equal((await post(server.base, '/orders', { key, body: {} })).status, 201);
    assert.equal((await post(server.base, '/orders', { key: 'k1', body: {} })).headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(claims, [true, false, false, false], 'the first claim bound; none after the mismatch');
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /transaction pooler/);
    assert.equal(await effects(pool, scope), 3);
  } finally { await server.close(); }
});

test('on one connection the binding stays on, and no warning', async () => {
  const scope = scopeFor('direct');
  const warnings = [];
  const server = await listen(ordersApp({ pool, logger: { warn: (m) => warnings.push(m), error: console.error } }, scope));
  try {
    for (const key of ['k1', 'k2']) assert.equal((await post(server.base, '/orders', { key, body: {} })).status, 201);
    assert.deepEqual(warnings, []);
  } finally { await server.close(); }
});

test('a server that refuses to bind (55000): the claim runs unbound, with one warning', async () => {
  const scope = scopeFor('refused');
  const claims = [];
  const refusing = {
    async connect() {
      const client = await pool.connect();
      return {
        query(sql, args) {
          if (/idem\.claim_/.test(sql)) {
            claims.push(/bind_lock_to_session/.test(sql));
            if (/bind_lock_to_session/.test(sql)) {
              return Promise.reject(Object.assign(new Error('idem.bind_lock_to_session needs the preload'), { code: '55000' }));
            }
          }
          return client.query(sql, args);
        },
        release: (error) => client.release(error),
      };
    },
  };
  const warnings = [];
  const server = await listen(ordersApp({ pool: refusing, logger: { warn: (m) => warnings.push(m), error: console.error } }, scope));
  try {
    assert.equal((await post(server.base, '/orders', { key: 'k1', body: {} })).status, 201);
    assert.equal((await post(server.base, '/orders', { key: 'k2', body: {} })).status, 201);
    assert.deepEqual(claims, [true, false, false]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /refused/);
  } finally { await server.close(); }
});

test('bindLockToSession: false never binds', async () => {
  const scope = scopeFor('unbound');
  const claims = [];
  const counting = {
    async connect() {
      const client = await pool.connect();
      return {
        query(sql, args) {
          if (/idem\.claim_/.test(sql)) claims.push(/bind_lock_to_session/.test(sql));
          return client.query(sql, args);
        },
        release: (error) => client.release(error),
      };
    },
  };
  const server = await listen(ordersApp({ pool: counting, bindLockToSession: false }, scope));
  try {
    assert.equal((await post(server.base, '/orders', { key: 'k', body: {} })).status, 201);
    assert.deepEqual(claims, [false]);
  } finally { await server.close(); }
});
