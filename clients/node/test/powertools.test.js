// The Powertools persistence layer over idem: a replay, a concurrent twin,
// a payload mismatch, a failure then a corrected retry, a timeout takeover
// (the Lambda's remaining time as idem's lock), and the handler's writes
// committed with the result.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
const { IdemPersistenceLayer } = require('../lib/powertools');
const { makePool, scopeFor, effects, gate, until, hasAdapterCalls } = require('./helpers');

const pool = makePool(10);
test.after(() => pool.end());

function setup({ transactional = true, body = async () => {} } = {}) {
  const scope = scopeFor('powertools');
  const layer = new IdemPersistenceLayer({ pool, scope, transactional });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'orderId', payloadValidationJmesPath: 'amount' });
  let calls = 0;
  const handler = makeIdempotent(async (event) => {
    calls += 1;
    await body(event, calls);
    const db = transactional ? layer.client(event) : pool;
    const { rows } = await db.query(
      'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
      [scope, event.orderId, event]);
    return { paymentId: Number(rows[0].id), amount: event.amount };
  }, { persistenceStore: layer, config });
  return { scope, layer, config, handler, calls: () => calls };
}

// A Lambda context with the remaining time Powertools reads.
function contextWith(ms) {
  return { getRemainingTimeInMillis: () => ms, functionName: 'test', awsRequestId: 'r' };
}

test('the second call with the same event replays the first result', async () => {
  const s = setup();
  const first = await s.handler({ orderId: 'o-1', amount: 10 });
  const second = await s.handler({ orderId: 'o-1', amount: 10 });
  assert.deepEqual(second, first);
  assert.equal(s.calls(), 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('a concurrent twin is refused as already in progress', async () => {
  const held = gate();
  const started = gate();
  const s = setup({ body: async (event, calls) => { if (calls === 1) { started.open(); await held.promise; } } });
  const original = s.handler({ orderId: 'o-2', amount: 5 });
  await started.promise;
  await assert.rejects(s.handler({ orderId: 'o-2', amount: 5 }), { name: 'IdempotencyAlreadyInProgressError' });
  held.open();
  await original;
  assert.equal(await effects(pool, s.scope), 1);
});

test('the same key with another payload is a validation error', async () => {
  const s = setup();
  await s.handler({ orderId: 'o-3', amount: 10 });
  await assert.rejects(s.handler({ orderId: 'o-3', amount: 99 }), { name: 'IdempotencyValidationError' });
  assert.equal(s.calls(), 1);
});

test('a failed handler gives its key up: the corrected event runs', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const s = setup({ body: async (event) => { if (event.amount < 0) throw new Error('negative amount'); } });
  await assert.rejects(s.handler({ orderId: 'o-4', amount: -1 }), /negative amount/);
  const result = await s.handler({ orderId: 'o-4', amount: 1 });
  assert.equal(result.amount, 1);
  assert.equal(await effects(pool, s.scope), 1);
  assert.deepEqual(await s.handler({ orderId: 'o-4', amount: 1 }), result);
});

test('the handler\'s writes roll back when it fails after them', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const scope = scopeFor('powertools');
  const layer = new IdemPersistenceLayer({ pool, scope, transactional: true });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'orderId' });
  let fail = true;
  const handler = makeIdempotent(async (event) => {
    await layer.client(event).query('INSERT INTO node_test.effects (scope, key) VALUES ($1, $2)', [scope, event.orderId]);
    if (fail) throw new Error('after the write');
    return 'ok';
  }, { persistenceStore: layer, config });
  await assert.rejects(handler({ orderId: 'o-5' }), /after the write/);
  assert.equal(await effects(pool, scope), 0);
  fail = false;
  assert.equal(await handler({ orderId: 'o-5' }), 'ok');
  assert.equal(await effects(pool, scope), 1);
});

test('a timed-out invocation is taken over; its late result is refused and rolled back', async () => {
  const held = gate();
  const started = gate();
  const s = setup({ body: async (event, calls) => { if (calls === 1) { started.open(); await held.promise; } } });
  // One second of remaining time: idem's lock on the key.
  const original = s.handler({ orderId: 'o-6', amount: 7 }, contextWith(1000));
  await started.promise;
  const result = await until(async () => {
    try {
      return await s.handler({ orderId: 'o-6', amount: 7 }, contextWith(60000));
    } catch (error) {
      if (error.name === 'IdempotencyAlreadyInProgressError') return null;
      throw error;
    }
  }, 'the lock to run out');
  assert.equal(result.amount, 7);
  held.open();
  await assert.rejects(original, (error) => error.name === 'IdempotencyPersistenceLayerError'
    && error.cause && error.cause.code === 'P4012');
  assert.equal(await effects(pool, s.scope), 1);
});

test('a storm: 16 concurrent invocations, 100 events x 3, random failures, every effect once', async (t) => {
  const haveRelease = await hasAdapterCalls(pool);
  if (!haveRelease) return t.skip('this idem has no idem.release (1.2)');
  const s = setup({ body: async () => { if (Math.random() < 0.15) throw new Error('injected'); } });
  const work = [];
  for (let k = 0; k < 100; k += 1) for (let d = 0; d < 3; d += 1) work.push(k);
  work.sort(() => Math.random() - 0.5);
  const results = new Map();
  let invocations = 0;
  const deadline = Date.now() + 120000;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (work.length > 0) {
      const k = work.pop();
      for (;;) {
        assert.ok(Date.now() < deadline, 'the storm took longer than its deadline');
        invocations += 1;
        try {
          const r = await s.handler({ orderId: `e-${k}`, amount: k });
          if (!results.has(k)) results.set(k, r);
          assert.deepEqual(r, results.get(k));
          break;
        } catch (error) {
          if (error.message !== 'injected' && error.name !== 'IdempotencyAlreadyInProgressError') throw error;
        }
      }
    }
  }));
  const { rows: [c] } = await pool.query(
    'SELECT count(*)::int AS effects, count(DISTINCT key)::int AS keys FROM node_test.effects WHERE scope = $1', [s.scope]);
  console.log(`powertools storm: invocations ${invocations}, effects ${c.effects}, duplicates ${c.effects - c.keys}`);
  assert.equal(c.keys, 100);
  assert.equal(c.effects, 100);
});
