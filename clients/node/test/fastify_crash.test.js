// A crash frees the key at once, on Fastify: the plugin binds each claim to
// the request's server session (bindLockToSession, on by default), so when
// the app process dies mid-handler (kill -9) its connection ends, the key is
// stale, and the retry takes it over (processing_stale) instead of a 409 for
// the whole lock (300 s here). Without the binding the same retry gets 409.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const Fastify = require('fastify');
const idempotency = require('../lib/fastify');
const { makePool, post, effects, spawnServer, sessionsGone } = require('./helpers');
const { listenFastify } = require('./fastify_helpers');

const pool = makePool(10);
test.after(() => pool.end());
const fixture = path.join(__dirname, 'fixtures', 'fastify-crash-server.js');

async function retryApp(route) {
  const app = Fastify();
  app.register(idempotency, { pool, lockTimeout: 300 });
  app.post(route, async (request, reply) => {
    await request.idem.client.query('INSERT INTO node_test.effects (scope, key) VALUES ($1, $2)',
      [request.idem.scope, request.idem.key]);
    return reply.code(201).send({ kind: request.idem.kind });
  });
  return listenFastify(app);
}

// Starts the fixture, sends one request, kills the process mid-handler;
// resolves once its server sessions are gone.
async function killMidHandler(route, env = {}) {
  const appName = `idem-fastify-crash-${randomUUID().slice(0, 8)}`;
  const server = await spawnServer(fixture, { ROUTE: route, APP_NAME: appName, ...env });
  const request = post(server.base, route, { key: 'k', body: { item: 'tea' } }).then(() => null, (error) => error);
  await server.lines(/handling/);
  server.child.kill('SIGKILL');
  const exit = await server.exited;
  assert.ok(await request, 'the first request got no answer');
  await sessionsGone(pool, appName);
  return exit;
}

test('fastify: kill -9 mid-handler: the retry takes the key over at once', async () => {
  const route = `/crash-${randomUUID().slice(0, 8)}/orders`;
  const exit = await killMidHandler(route);
  assert.equal(exit.signal, 'SIGKILL');
  assert.equal(await effects(pool, `POST ${route}`), 0, "the dead request's writes rolled back");
  const server = await retryApp(route);
  try {
    const retry = await post(server.base, route, { key: 'k', body: { item: 'tea' } });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(JSON.parse(retry.text).kind, 'processing_stale');
    assert.equal(await effects(pool, `POST ${route}`), 1);
  } finally { await server.close(); }
});

test('fastify: kill -9 with bindLockToSession: false: the retry gets 409 while the lock lasts', async () => {
  const route = `/crash-unbound-${randomUUID().slice(0, 8)}/orders`;
  await killMidHandler(route, { BIND: '0' });
  const server = await retryApp(route);
  try {
    const retry = await post(server.base, route, { key: 'k', body: { item: 'tea' } });
    assert.equal(retry.status, 409);
    assert.match(retry.headers.get('retry-after'), /^[0-9]+$/);
    assert.equal(await effects(pool, `POST ${route}`), 0);
  } finally { await server.close(); }
});
