// The Fastify plugin under load. A storm, the size of the Express one: 20
// concurrent clients send 200 keys three times each (600 requests,
// shuffled), and the handler fails 20% of the time, before or after its
// effect; a client resends on 409 and 5xx, as the draft asks. Answers carry
// Location, X-Order-Id (replayHeaders) and Cache-Control; every fifth key
// answers text/plain. Every key's effect must happen exactly once and every
// answer a key got must be the same status, replayed headers and bytes. The pool: 30
// simultaneous requests of one key with wait on a pool of 4 and on pg's
// default pool: a waiter never holds a connection the owner needs, so all
// 30 get the owner's answer and none a 409.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Pool } = require('pg');
const Fastify = require('fastify');
const idempotency = require('../lib/fastify');
const { url, makePool, post, hasAdapterCalls, driveStorm } = require('./helpers');
const { listenFastify } = require('./fastify_helpers');

const KEYS = 200;
const DUPLICATES = 3;
const CLIENTS = 20;

function ordersApp(pool, route, options, handle) {
  const app = Fastify();
  return app.register(idempotency, { pool, replayHeaders: ['x-order-id'], ...options }).then(() => {
    app.post(route, async (request, reply) => {
      await handle(request, 'before');
      const { rows } = await request.idem.client.query(
        'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
        [request.idem.scope, request.idem.key, JSON.stringify(request.body)]);
      const id = Number(rows[0].id);
      await handle(request, 'after');
      reply.code(201).header('location', `/orders/${id}`).header('x-order-id', String(id)).header('cache-control', 'no-store');
      const n = Number(/(\d+)$/.exec(request.idem.key)?.[1]);
      return n % 5 === 0 ? reply.send(`order ${id} for ${request.idem.key}`) : reply.send({ order_id: id, key: request.idem.key });
    });
    return listenFastify(app);
  });
}

// What must be the same in every answer a key gets.
function shape(answer) {
  return JSON.stringify([answer.status, answer.headers.get('content-type'), answer.headers.get('location'),
    answer.headers.get('x-order-id'), answer.headers.get('cache-control'), answer.bytes.toString('base64')]);
}

test(`fastify storm: ${CLIENTS} clients, ${KEYS} keys x ${DUPLICATES} duplicates, 20% failures`, async () => {
  const pool = makePool(CLIENTS + 5);
  const route = `/storm-${randomUUID().slice(0, 8)}/orders`;
  const scope = `POST ${route}`;
  let injected = 0;
  // A failed attempt releases its key (idem 1.2), or leaves it to a retry.
  const onError = (await hasAdapterCalls(pool)) ? 'release' : 'fail';
  const server = await ordersApp(pool, route, { wait: 10, lockTimeout: 30, onError }, async (request, phase) => {
    if (phase === 'before') request.roll = Math.random();
    if (phase === 'before' && request.roll < 0.1) { injected += 1; throw new Error('failure before the effect'); }
    if (phase === 'after' && request.roll >= 0.1 && request.roll < 0.2) { injected += 1; throw new Error('failure after the effect'); }
  });
  try {
    const { requests, resent, replays, answers } = await driveStorm({
      base: server.base, path: route, keys: KEYS, duplicates: DUPLICATES, clients: CLIENTS,
      body: (key) => ({ item: key, quantity: 1 }), record: shape,
    });
    const { rows: [counts] } = await pool.query(
      `SELECT count(*)::int AS effects, count(DISTINCT key)::int AS keys
         FROM node_test.effects WHERE scope = $1`, [scope]);
    const duplicates = counts.effects - counts.keys;
    const identical = [...answers.values()].filter((shapes) => shapes.every((s) => s === shapes[0])).length;
    console.log(`storm: fastify: ${CLIENTS} clients x ${KEYS} keys x ${DUPLICATES}: requests ${requests} (resent ${resent}), ` +
      `effects ${counts.effects}, duplicates ${duplicates}, replays ${replays}, keys with byte-identical answers and headers ` +
      `${identical}/${answers.size}, failures injected ${injected} (onError ${onError})`);
    assert.equal(counts.keys, KEYS);
    assert.equal(counts.effects, KEYS);
    assert.equal(duplicates, 0);
    assert.equal(answers.size, KEYS);
    for (const [key, shapes] of answers) {
      assert.equal(shapes.length, DUPLICATES);
      assert.ok(shapes.every((s) => s === shapes[0]), `every answer for ${key} is the same status, headers and bytes`);
    }
    assert.equal(replays, KEYS * (DUPLICATES - 1));
    assert.ok(injected > 0 || requests === KEYS * DUPLICATES, 'failures were injected');
  } finally {
    await server.close();
    await pool.end();
  }
});

// 30 requests of one key at once, a 300 ms handler, wait 5 s.
for (const size of [4, null]) {
  const label = size === null ? 'the default pool' : `a pool of ${size}`;
  test(`fastify pool: 30 simultaneous requests of one key with wait on ${label} all get the owner's answer`, async () => {
    const pool = size === null ? new Pool({ connectionString: url }) : makePool(size);
    pool.on('error', () => {});
    const route = `/pool-${randomUUID().slice(0, 8)}/orders`;
    const server = await ordersApp(pool, route, { wait: 5 },
      (request, phase) => phase === 'after' && new Promise((resolve) => setTimeout(resolve, 300)));
    try {
      const body = { item: 'tea', quantity: 1 };
      const started = performance.now();
      const answers = await Promise.all(Array.from({ length: 30 }, () =>
        post(server.base, route, { key: 'k', body }).then((a) => ({ ...a, at: performance.now() - started }))));
      const statuses = answers.map((a) => a.status);
      const owners = answers.filter((a) => a.headers.get('idempotent-replayed') === null);
      const twins = answers.filter((a) => a.headers.get('idempotent-replayed') === 'true');
      const { rows: [{ n }] } = await pool.query('SELECT count(*)::int AS n FROM node_test.effects WHERE scope = $1',
        [`POST ${route}`]);
      const after = owners.length === 1 ? twins.map((a) => Math.round(a.at - owners[0].at)).sort((a, b) => a - b) : [];
      console.log(`pool: fastify, ${label} (max ${pool.options.max}): 30 requests, ${n} effect(s), ` +
        `${twins.length} replays, ${statuses.filter((s) => s === 409).length} 409s; owner finished at ` +
        `${owners.length === 1 ? Math.round(owners[0].at) : '?'} ms; twins after the owner (ms): ` +
        `min ${after[0]}, median ${after[Math.floor(after.length / 2)]}, max ${after[after.length - 1]}`);
      assert.deepEqual(statuses, Array(30).fill(201));
      assert.equal(owners.length, 1);
      assert.equal(twins.length, 29);
      assert.equal(n, 1);
      for (const twin of twins) assert.equal(shape(twin), shape(owners[0]));
    } finally {
      await server.close();
      await pool.end();
    }
  });
}
