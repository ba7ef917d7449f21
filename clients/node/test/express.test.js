// The draft's cases ("The Idempotency-Key HTTP Header Field") against a real
// server: missing key, first request, replay, mismatch, concurrent twin,
// crash between charge and outcome with a takeover, a retry after the lock
// expired, and a handler error that releases the key.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, scopeFor, listen, post, effects, gate, until, hasAdapterCalls } = require('./helpers');

const pool = makePool(20);
test.after(() => pool.end());

for (const { name, express, module } of EXPRESS_VERSIONS) test.describe(name, () => {
  // An orders endpoint: one effect row per order, in the request's transaction.
  function ordersApp(scope, options = {}, before = async () => {}) {
    const app = express();
    app.post('/orders', idempotency({ pool, scope, ...options }), async (req, res, next) => {
      try {
        await before(req, res);
        if (res.headersSent || res.writableEnded) return;
        const { rows } = await req.idem.client.query(
          'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
          [scope, req.idem.key, req.body]);
        res.status(201).json({ order_id: Number(rows[0].id), item: req.body.item, quantity: req.body.quantity });
      } catch (error) {
        next(error);
      }
    });
    return app;
  }

  test('a request without the key is refused with 400 problem details', async () => {
    const scope = scopeFor('missing');
    const server = await listen(ordersApp(scope));
    try {
      const answer = await post(server.base, '/orders', { body: { item: 'tea', quantity: 1 } });
      assert.equal(answer.status, 400);
      assert.match(answer.headers.get('content-type'), /^application\/problem\+json/);
      assert.equal(JSON.parse(answer.text).status, 400);
      assert.equal(await effects(pool, scope), 0);
    } finally { await server.close(); }
  });

  test('the first request runs; a replay sends the same bytes, marked', async () => {
    const scope = scopeFor('replay');
    const server = await listen(ordersApp(scope));
    try {
      const body = '{"quantity": 2, "item": "tea"}';
      const first = await post(server.base, '/orders', { key: 'k-1', body });
      assert.equal(first.status, 201);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      // The same document in another spelling is the same request (RFC 8785).
      const again = await post(server.base, '/orders', { key: '"k-1"', body: '{"item":"tea","quantity":2.0}' });
      assert.equal(again.status, 201);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(again.bytes, first.bytes);
      assert.equal(await effects(pool, scope, 'k-1'), 1);
    } finally { await server.close(); }
  });

  test('a reused key with another body is 422', async () => {
    const scope = scopeFor('mismatch');
    const server = await listen(ordersApp(scope));
    try {
      assert.equal((await post(server.base, '/orders', { key: 'k', body: { item: 'tea', quantity: 1 } })).status, 201);
      const other = await post(server.base, '/orders', { key: 'k', body: { item: 'tea', quantity: 9 } });
      assert.equal(other.status, 422);
      assert.match(other.headers.get('content-type'), /^application\/problem\+json/);
      assert.equal(JSON.parse(other.text).sqlstate, 'P4002');
      if (await hasAdapterCalls(pool)) assert.equal(JSON.parse(other.text).stored_status, 'succeeded');
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test('bad input: a key too long, a body that is not JSON, an inexact number are 400', async () => {
    const scope = scopeFor('bad');
    const server = await listen(ordersApp(scope));
    try {
      assert.equal((await post(server.base, '/orders', { key: 'x'.repeat(256), body: { item: 'tea' } })).status, 400);
      assert.equal((await post(server.base, '/orders', { key: 'k', body: '{"item": tea' })).status, 400);
      const inexact = await post(server.base, '/orders', { key: 'k', body: '{"amount": 12345678901234567890}' });
      assert.equal(inexact.status, 400);
      assert.equal(JSON.parse(inexact.text).sqlstate, 'P4005');
      assert.equal(await effects(pool, scope), 0);
    } finally { await server.close(); }
  });

  test('a concurrent twin gets 409 with Retry-After; with wait it gets the replay', async () => {
    const scope = scopeFor('twin');
    const held = gate();
    const started = gate();
    const server = await listen(ordersApp(scope, {}, async () => { started.open(); await held.promise; }));
    const waiting = await listen(ordersApp(scope, { wait: 30 }));
    try {
      const body = { item: 'tea', quantity: 1 };
      const original = post(server.base, '/orders', { key: 'k', body });
      await started.promise;
      const twin = await post(server.base, '/orders', { key: 'k', body });
      assert.equal(twin.status, 409);
      assert.match(twin.headers.get('retry-after'), /^[1-9][0-9]*$/);
      const waiter = post(waiting.base, '/orders', { key: 'k', body });
      held.open();
      const first = await original;
      assert.equal(first.status, 201);
      const waited = await waiter;
      assert.equal(waited.status, 201);
      assert.equal(waited.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(waited.bytes, first.bytes);
      assert.equal(await effects(pool, scope), 1);
    } finally { held.open(); await server.close(); await waiting.close(); }
  });

  test('a crash between the charge and the outcome: the takeover resumes after the charge', async () => {
    const scope = scopeFor('crash');
    const body = { item: 'tea', quantity: 3 };
    // The first server charges, commits that phase with its recovery point, and dies.
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'charge-server.js')], {
      env: { ...process.env, SCOPE: scope, CRASH_AFTER_CHARGE: '1', LOCK_TIMEOUT: '1', EXPRESS: module },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const port = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
        const m = /listening on port (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.on('exit', () => reject(new Error('the charge server exited before listening')));
    });
    await assert.rejects(post(`http://127.0.0.1:${port}`, '/orders', { key: 'k', body }));
    await exited;
    assert.equal(await effects(pool, scope, 'k'), 1, 'the charge committed before the crash');

    // Its replacement: 409 while the dead owner's lock lasts, then the takeover.
    const { chargeApp } = require('./fixtures/charge-server');
    const server = await listen(chargeApp(pool, scope, { lockTimeout: 1 }, false, express));
    try {
      const answer = await until(async () => {
        const a = await post(server.base, '/orders', { key: 'k', body });
        return a.status === 409 ? null : a;
      }, 'the takeover');
      assert.equal(answer.status, 201);
      assert.equal(JSON.parse(answer.text).resumed_from, 'charged');
      assert.equal(await effects(pool, scope, 'k'), 2, 'one charge and one order');
      const { rows } = await pool.query(
        'SELECT what, count(*)::int AS n FROM node_test.effects WHERE scope = $1 GROUP BY what ORDER BY what', [scope]);
      assert.deepEqual(rows, [{ what: 'charge', n: 1 }, { what: 'order', n: 1 }]);
    } finally { await server.close(); }
  });

  test('a retry after the lock expired takes over; the slow original is rolled back', async () => {
    const scope = scopeFor('expired');
    const held = gate();
    const started = gate();
    let calls = 0;
    const server = await listen(ordersApp(scope, { lockTimeout: 1 }, async () => {
      calls += 1;
      if (calls === 1) { started.open(); await held.promise; }
    }));
    try {
      const body = { item: 'tea', quantity: 1 };
      const original = post(server.base, '/orders', { key: 'k', body });
      await started.promise;
      const retry = await until(async () => {
        const a = await post(server.base, '/orders', { key: 'k', body });
        return a.status === 409 ? null : a;
      }, 'the lock to expire');
      assert.equal(retry.status, 201);
      held.open();
      const late = await original;
      assert.equal(late.status, 409, 'the original lost its key to the retry');
      assert.equal(JSON.parse(late.text).sqlstate, 'P4012');
      assert.equal(await effects(pool, scope, 'k'), 1);
      const replay = await post(server.base, '/orders', { key: 'k', body });
      assert.deepEqual(replay.bytes, retry.bytes);
    } finally { held.open(); await server.close(); }
  });

  test('a handler error releases the key: a corrected request runs under it', async (t) => {
    if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
    const scope = scopeFor('release');
    const server = await listen(ordersApp(scope, {}, async (req) => {
      if (req.body.quantity < 1) throw new Error('quantity must be positive');
    }));
    try {
      const bad = await post(server.base, '/orders', { key: 'k', body: { item: 'tea', quantity: 0 } });
      assert.equal(bad.status, 500);
      assert.equal(await effects(pool, scope), 0);
      const corrected = await post(server.base, '/orders', { key: 'k', body: { item: 'tea', quantity: 1 } });
      assert.equal(corrected.status, 201);
      assert.equal(corrected.headers.get('idempotent-replayed'), null);
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test("onError 'fail': only the same body may retry the key", async () => {
    const scope = scopeFor('fail');
    let fail = true;
    const server = await listen(ordersApp(scope, { onError: 'fail' }, async () => {
      if (fail) throw new Error('a dependency is down');
    }));
    try {
      const body = { item: 'tea', quantity: 1 };
      assert.equal((await post(server.base, '/orders', { key: 'k', body })).status, 500);
      assert.equal((await post(server.base, '/orders', { key: 'k', body: { item: 'tea', quantity: 2 } })).status, 422);
      fail = false;
      assert.equal((await post(server.base, '/orders', { key: 'k', body })).status, 201);
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test('a 4xx answer is stored and replayed; the handler\'s writes commit with it', async () => {
    const scope = scopeFor('final');
    const app = express();
    app.post('/orders', idempotency({ pool, scope }), async (req, res) => {
      await req.idem.client.query('INSERT INTO node_test.effects (scope, key, what) VALUES ($1, $2, $3)',
        [scope, req.idem.key, 'refusal']);
      res.status(402).json({ error: 'card declined' });
    });
    const server = await listen(app);
    try {
      const first = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(first.status, 402);
      const again = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(again.status, 402);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(again.bytes, first.bytes);
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });
});
