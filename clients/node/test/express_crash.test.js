// A crash frees the key at once: the claim binds the key to the request's
// server session (bindLockToSession, on by default), so when the app process
// dies mid-handler (kill -9, or Express 4's unhandled rejection of an async
// handler) its connection ends, the key is stale, and the retry takes it
// over instead of a 409 for the whole lock (300 s here). Without the binding
// the same retry gets the 409.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, scopeFor, listen, post, effects, spawnServer, sessionsGone } = require('./helpers');

const pool = makePool(10);
test.after(() => pool.end());
const fixture = path.join(__dirname, 'fixtures', 'crash-server.js');

function retryApp(express, scope) {
  const app = express();
  app.post('/orders', idempotency({ pool, scope, lockTimeout: 300 }), async (req, res) => {
    await req.idem.client.query('INSERT INTO node_test.effects (scope, key) VALUES ($1, $2)', [scope, req.idem.key]);
    res.status(201).json({ retried: true });
  });
  return app;
}

// Starts the fixture, sends one request, and ends the process as mode says;
// resolves once its server sessions are gone.
async function crashMidHandler(scope, env) {
  const appName = `idem-crash-${randomUUID().slice(0, 8)}`;
  const server = await spawnServer(fixture, { SCOPE: scope, APP_NAME: appName, ...env });
  const request = post(server.base, '/orders', { key: 'k', body: { item: 'tea' } }).then(() => null, (error) => error);
  await server.lines(/handling/);
  if (env.MODE === 'hang') server.child.kill('SIGKILL');
  const exit = await server.exited;
  assert.ok(await request, 'the first request got no answer');
  await sessionsGone(pool, appName);
  return exit;
}

for (const { name, express, module } of EXPRESS_VERSIONS) test.describe(name, () => {
  test('kill -9 mid-handler: the retry takes the key over at once', async () => {
    const scope = scopeFor('kill9');
    const exit = await crashMidHandler(scope, { MODE: 'hang', EXPRESS: module });
    assert.equal(exit.signal, 'SIGKILL');
    assert.equal(await effects(pool, scope), 0, 'the dead request\'s writes rolled back');
    const server = await listen(retryApp(express, scope));
    try {
      const retry = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers.get('idempotent-replayed'), null);
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test('kill -9 with bindLockToSession: false: the retry gets 409 while the lock lasts', async () => {
    const scope = scopeFor('kill9-unbound');
    await crashMidHandler(scope, { MODE: 'hang', EXPRESS: module, BIND: '0' });
    const server = await listen(retryApp(express, scope));
    try {
      const retry = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(retry.status, 409);
      assert.match(retry.headers.get('retry-after'), /^[0-9]+$/);
      assert.equal(await effects(pool, scope), 0);
    } finally { await server.close(); }
  });
});

test('express 4: an async handler that throws ends the process; the key is free at once after a restart', async () => {
  const scope = scopeFor('express4-throw');
  const exit = await crashMidHandler(scope, { MODE: 'throw', EXPRESS: 'express4' });
  assert.notEqual(exit.code, 0, 'Node ended the process on the unhandled rejection');
  assert.equal(await effects(pool, scope), 0);
  // The restarted app: the same request under the same key runs now.
  const server = await listen(retryApp(require('express4'), scope));
  try {
    const retry = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(await effects(pool, scope), 1);
  } finally { await server.close(); }
});
