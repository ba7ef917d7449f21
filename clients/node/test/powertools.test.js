// The Powertools persistence layer over idem: a replay, a concurrent twin,
// a payload mismatch, a failure then a corrected retry, a timeout takeover
// (the Lambda's remaining time as idem's lock), and the handler's writes
// committed with the result, results replayed as their first JSON text (key
// order kept; what earlier versions stored replays as before), the outcome
// on the claimed key when the handler changes its event.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
const { IdemPersistenceLayer } = require('../lib/powertools');
const store = require('../lib/store');
const { makePool, scopeFor, effects, gate, until, hasAdapterCalls } = require('./helpers');
const { storm } = require('./powertools_storm');

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
  await assert.rejects(s.handler({ orderId: 'o-2', amount: 5 }), { name: 'IdempotencyAlreadyInProgressError' });
  held.open();
  const result = await original;
  assert.deepEqual(await s.handler({ orderId: 'o-2', amount: 5 }), result);
  assert.equal(s.calls(), 1);
  assert.equal(await effects(pool, s.scope), 1);
});

test('the same key with another payload is a validation error', async () => {
  const s = setup();
  const first = await s.handler({ orderId: 'o-3', amount: 10 });
  await assert.rejects(s.handler({ orderId: 'o-3', amount: 99 }), { name: 'IdempotencyValidationError' });
  assert.deepEqual(await s.handler({ orderId: 'o-3', amount: 10 }), first);
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

// A handler returning what it is given (the event's result field).
function echo({ config = new IdempotencyConfig({ eventKeyJmesPath: 'orderId' }) } = {}) {
  const scope = scopeFor('powertools');
  const layer = new IdemPersistenceLayer({ pool, scope });
  let calls = 0;
  const handler = makeIdempotent(async (event) => { calls += 1; return event.result; }, { persistenceStore: layer, config });
  return { scope, layer, config, handler, calls: () => calls };
}

// The response_body text idem keeps for an event's key (idem.peek).
async function storedBody(layer, scope, event) {
  const row = await store.peek(pool, scope, layer.getHashedIdempotencyKey(event));
  return row && row.stored;
}

test('a replay stringifies as the first result: key order and numbers kept', async () => {
  // jsonb would give {"a": 2, "z": 1, ...}; numbers are JS values by now
  // (1.10 is 1.1, 1e2 is 100), so their text is JSON.stringify's either way.
  const result = JSON.parse('{"z":1,"a":2,"nested":{"b":1,"a":2},"list":[{"y":1,"x":2}],"price":1.10,"hundred":1e2,"big":1e21,"tiny":5e-7,"text":"\u00e9"}');
  const s = echo();
  const first = await s.handler({ orderId: 'k-1', result });
  const replay = await s.handler({ orderId: 'k-1', result });
  assert.equal(s.calls(), 1);
  assert.equal(JSON.stringify(replay), JSON.stringify(first));
  assert.equal(JSON.stringify(replay), '{"z":1,"a":2,"nested":{"b":1,"a":2},"list":[{"y":1,"x":2}],"price":1.1,"hundred":100,"big":1e+21,"tiny":5e-7,"text":"é"}');
  // Stored as the envelope with the first result's JSON text.
  const stored = await storedBody(s.layer, s.scope, { orderId: 'k-1' });
  assert.deepEqual(JSON.parse(stored), { idem_powertools: 1, json: JSON.stringify(first) });
});

test('results of every JSON type replay as they were (U+0000 too, which jsonb refuses); no result replays as none', async () => {
  const s = echo();
  for (const [i, result] of [['a string'], ['a\u0000b'], [{ k: 'a\u0000b' }], [0], [false], [null], [[3, 1, 2]], [undefined]].entries()) {
    const first = await s.handler({ orderId: `t-${i}`, result: result[0] });
    const replay = await s.handler({ orderId: `t-${i}`, result: result[0] });
    assert.equal(JSON.stringify(replay), JSON.stringify(first));
    assert.deepEqual(replay, result[0]);
  }
  assert.equal(s.calls(), 8);
});

// The claim an earlier version's layer made for an event: same key, same payload hash.
async function claimAsLayer(s, event) {
  s.layer.configure({ config: s.config });
  const key = s.layer.getHashedIdempotencyKey(event);
  const claim = await store.claim(pool, { scope: s.scope, key, hash: s.layer.getHashedPayload(event) });
  return { scope: s.scope, key, fence: claim.fence };
}
const validated = () => new IdempotencyConfig({ eventKeyJmesPath: 'orderId', payloadValidationJmesPath: 'orderId' });

test('a result stored by an earlier version (the result itself as jsonb) replays as before', async () => {
  const s = echo({ config: validated() });
  const event = { orderId: 'legacy-1' };
  const legacy = { z: 1, a: 2, idem_http: 1 };
  // What 0.1.0 stored: JSON.stringify(result) as jsonb (its keys reordered).
  await store.succeed(pool, await claimAsLayer(s, event), 200, JSON.stringify(legacy));
  const replay = await s.handler({ ...event, result: 'not run' });
  assert.deepEqual(replay, legacy);
  assert.equal(JSON.stringify(replay), '{"a":2,"z":1,"idem_http":1}');
  assert.equal(s.calls(), 0);
});

test('an envelope of a newer version is refused, not replayed as a result', async () => {
  const s = echo({ config: validated() });
  const event = { orderId: 'newer-1' };
  await store.succeed(pool, await claimAsLayer(s, event), 200, '{"idem_powertools": 2, "json": "1"}');
  await assert.rejects(s.handler({ ...event, result: 'not run' }),
    (error) => error.name === 'IdempotencyPersistenceLayerError' && /newer version/.test(error.cause.message));
  assert.equal(s.calls(), 0);
});

test('a handler that changes its event completes the key it claimed', async () => {
  const scope = scopeFor('powertools');
  const layer = new IdemPersistenceLayer({ pool, scope });
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'orderId' });
  let calls = 0;
  const handler = makeIdempotent(async (event) => {
    calls += 1;
    event.orderId = `normalised-${event.orderId}`; // the key's field, changed in place
    return { ok: calls };
  }, { persistenceStore: layer, config });
  const first = await handler({ orderId: 'c-1' });
  assert.deepEqual(await handler({ orderId: 'c-1' }), first);
  assert.equal(calls, 1);
  assert.equal(JSON.parse(await storedBody(layer, scope, { orderId: 'c-1' })).json, '{"ok":1}');
  assert.equal(await storedBody(layer, scope, { orderId: 'normalised-c-1' }), null);
});

test('a storm: 16 concurrent invocations, 100 events x 3, random failures, every effect once, replays byte-identical', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const s = setup({ body: async () => { if (Math.random() < 0.15) throw new Error('injected'); } });
  await storm({ pool, scope: s.scope, invoke: s.handler, label: 'makeIdempotent' });
});
