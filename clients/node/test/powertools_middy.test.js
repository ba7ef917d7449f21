// The Powertools persistence layer under the Middy middleware
// (makeHandlerIdempotent): a concurrent twin and a payload mismatch reach the
// caller as Powertools' own errors and leave the owner's record as it was, a
// replay, a failed handler that gives its key up, one event object handed to
// two invocations at once, a storm, and which Powertools still
// deletes a record after refusing the event itself (the reason deleteRecord
// is a no-op for an event that claimed nothing).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
const { makeHandlerIdempotent } = require('@aws-lambda-powertools/idempotency/middleware');
const { IdemPersistenceLayer } = require('../lib/powertools');
const { makePool, scopeFor, effects, gate, hasAdapterCalls } = require('./helpers');
const { storm } = require('./powertools_storm');

const pool = makePool(10);
test.after(() => pool.end());

// @middy/core is an ES module: import() loads it from CommonJS on every Node >= 20.
let middy;
test.before(async () => { middy = (await import('@middy/core')).default; });

// The installed Powertools' version (its package.json is not in its exports).
function powertoolsVersion() {
  let dir = path.dirname(require.resolve('@aws-lambda-powertools/idempotency'));
  while (!fs.existsSync(path.join(dir, 'package.json')) || JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name !== '@aws-lambda-powertools/idempotency') {
    dir = path.dirname(dir);
  }
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
}

function atMost(version, limit) {
  const a = version.split(/[.-]/).slice(0, 3).map(Number);
  const b = limit.split('.').map(Number);
  for (let i = 0; i < 3; i += 1) if (a[i] !== b[i]) return a[i] < b[i];
  return true;
}

// A Lambda context: Middy reads the remaining time (its early timeout), and
// Powertools makes it idem's lock.
const context = { getRemainingTimeInMillis: () => 60000, functionName: 'test', awsRequestId: 'r' };

// A Middy handler over a layer of its own; deletes counts the deleteRecord
// calls Powertools makes.
function setup({ transactional = true, body = async () => {} } = {}) {
  const scope = scopeFor('middy');
  const counts = { calls: 0, deletes: 0 };
  class Counting extends IdemPersistenceLayer {
    async deleteRecord(data) {
      counts.deletes += 1;
      return super.deleteRecord(data);
    }
  }
  const layer = new Counting({ pool, scope, transactional });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'orderId', payloadValidationJmesPath: 'amount' });
  const handler = middy(async (event) => {
    counts.calls += 1;
    await body(event, counts.calls);
    const db = transactional ? layer.client(event) : pool;
    const { rows } = await db.query(
      'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
      [scope, event.orderId, event]);
    return { paymentId: Number(rows[0].id), amount: event.amount };
  }).use(makeHandlerIdempotent({ persistenceStore: layer, config }));
  return { scope, layer, handler, counts, invoke: (event) => handler(event, context) };
}

test('Middy: the second event replays the first result', async () => {
  const s = setup();
  const first = await s.invoke({ orderId: 'm-1', amount: 10 });
  const second = await s.invoke({ orderId: 'm-1', amount: 10 });
  assert.deepEqual(second, first);
  assert.equal(s.counts.calls, 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: a concurrent twin is IdempotencyAlreadyInProgressError, and the owner keeps its key', async () => {
  const held = gate();
  const started = gate();
  const s = setup({ body: async (event, calls) => { if (calls === 1) { started.open(); await held.promise; } } });
  const original = s.invoke({ orderId: 'm-2', amount: 5 });
  await started.promise;
  await assert.rejects(s.invoke({ orderId: 'm-2', amount: 5 }), { name: 'IdempotencyAlreadyInProgressError' });
  // The refusal released nothing: a second twin is refused the same way.
  await assert.rejects(s.invoke({ orderId: 'm-2', amount: 5 }), { name: 'IdempotencyAlreadyInProgressError' });
  held.open();
  const result = await original;
  assert.deepEqual(await s.invoke({ orderId: 'm-2', amount: 5 }), result);
  assert.equal(s.counts.calls, 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: another payload under the key is IdempotencyValidationError, and the first result stays', async () => {
  const s = setup();
  const first = await s.invoke({ orderId: 'm-3', amount: 10 });
  await assert.rejects(s.invoke({ orderId: 'm-3', amount: 99 }), { name: 'IdempotencyValidationError' });
  assert.deepEqual(await s.invoke({ orderId: 'm-3', amount: 10 }), first);
  assert.equal(s.counts.calls, 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: another payload while the first runs is IdempotencyValidationError too', async () => {
  const held = gate();
  const started = gate();
  const s = setup({ body: async (event, calls) => { if (calls === 1) { started.open(); await held.promise; } } });
  const original = s.invoke({ orderId: 'm-4', amount: 1 });
  await started.promise;
  await assert.rejects(s.invoke({ orderId: 'm-4', amount: 2 }), { name: 'IdempotencyValidationError' });
  held.open();
  assert.equal((await original).amount, 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: a failed handler rolls its writes back and gives its key up: the corrected event runs', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const s = setup({
    body: async (event) => {
      await s.layer.client(event).query('INSERT INTO node_test.effects (scope, key, what) VALUES ($1, $2, $3)',
        [s.scope, event.orderId, 'before the check']);
      if (event.amount < 0) throw new Error('negative amount');
    },
  });
  await assert.rejects(s.invoke({ orderId: 'm-5', amount: -1 }), /negative amount/);
  assert.equal(await effects(pool, s.scope), 0);
  const result = await s.invoke({ orderId: 'm-5', amount: 1 });
  assert.equal(result.amount, 1);
  assert.deepEqual(await s.invoke({ orderId: 'm-5', amount: 1 }), result);
  assert.equal(await effects(pool, s.scope), 2); // the corrected run's two rows
});

test('Middy: one event object handed to two invocations at once: the second waits and replays the first', async () => {
  const held = gate();
  const started = gate();
  const s = setup({ body: async (event, calls) => { if (calls === 1) { started.open(); await held.promise; } } });
  const event = { orderId: 'm-7', amount: 3 };
  const first = s.invoke(event);
  await started.promise;
  const second = s.invoke(event);
  held.open();
  const [a, b] = await Promise.all([first, second]);
  assert.deepEqual(b, a);
  assert.equal(s.counts.calls, 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: one event object twice at once, the first failing: the second runs on its own', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const held = gate();
  const started = gate();
  const s = setup({
    body: async (event, calls) => {
      if (calls === 1) { started.open(); await held.promise; throw new Error('first fails'); }
    },
  });
  const event = { orderId: 'm-8', amount: 4 };
  const first = s.invoke(event);
  await started.promise;
  const second = s.invoke(event);
  held.open();
  await assert.rejects(first, /first fails/);
  assert.equal((await second).amount, 4);
  assert.equal(s.counts.calls, 2);
  assert.equal(await effects(pool, s.scope), 1);
});

test('Middy: a storm: 16 concurrent invocations, 100 events x 3, random failures, every effect once, replays byte-identical', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const s = setup({ body: async () => { if (Math.random() < 0.15) throw new Error('injected'); } });
  await storm({ pool, scope: s.scope, invoke: s.invoke, label: 'Middy' });
});

// Powertools up to 2.35.0 deletes the record in the middleware's onError after
// its own before hook refused the event (upstream
// aws-powertools/powertools-lambda-typescript issue 5675). IdemPersistenceLayer
// answers that delete with a no-op, which the tests above need on 2.35.0;
// once the installed Powertools no longer makes the call, the no-op is dead
// code that can go (this test then says so).
test('Middy: which Powertools deletes after refusing an event itself', async (t) => {
  const s = setup();
  await s.invoke({ orderId: 'm-6', amount: 10 });
  await assert.rejects(s.invoke({ orderId: 'm-6', amount: 99 }), { name: 'IdempotencyValidationError' });
  const version = powertoolsVersion();
  const deletesAfterRefusal = s.counts.deletes > 0;
  if (atMost(version, '2.35.0')) {
    assert.equal(deletesAfterRefusal, true, `Powertools ${version}: expected the middleware to delete after its own refusal`);
    t.diagnostic(`Powertools ${version} deletes after refusing an event: IdemPersistenceLayer's no-op deleteRecord is needed`);
  } else {
    t.diagnostic(deletesAfterRefusal
      ? `Powertools ${version} still deletes after refusing an event: keep the no-op deleteRecord`
      : `Powertools ${version} no longer deletes after refusing an event: the no-op deleteRecord can go`);
  }
  assert.equal(s.counts.calls, 1);
});
