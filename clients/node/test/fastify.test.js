// The Fastify plugin ('@idem/postgres/fastify') against a real server: the
// key; the stored answer replayed with its headers whatever its body (text,
// Buffer, stream, Response); a hijacked reply; 4xx stored and 5xx given up;
// phases with a recovery point; 422; 409 with Retry-After and waiting; a
// takeover after the lock; the default scope per route and the principal
// hook; which routes the plugin covers; bad options; answers stored as
// plain JSON or by a newer package. The crash test is fastify_crash.test.js,
// the load fastify_storm.test.js.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Readable } = require('node:stream');
const { randomUUID } = require('node:crypto');
const Fastify = require('fastify');
const idempotency = require('../lib/fastify');
const { makePool, post, effects, gate, until, hasAdapterCalls } = require('./helpers');
const { listenFastify } = require('./fastify_helpers');

const pool = makePool(20);
test.after(() => pool.end());

// A path of its own per test: the default scope is '<METHOD> <path>', so
// tests (and runs against one database) never share a key.
function unique(name) {
  return `${name}-${randomUUID().slice(0, 8)}`;
}

// An app with the plugin and one route; handle(request, reply, effect) answers.
async function appWith(options, route, handle) {
  const app = Fastify();
  await app.register(idempotency, { pool, ...options });
  app.post(route, async (request, reply) => {
    const effect = async (what = 'effect') => {
      const { rows } = await request.idem.client.query(
        'INSERT INTO node_test.effects (scope, key, what, body) VALUES ($1, $2, $3, $4) RETURNING id',
        [request.idem.scope, request.idem.key, what, request.body === undefined ? null : JSON.stringify(request.body)]);
      return Number(rows[0].id);
    };
    return handle(request, reply, effect);
  });
  return listenFastify(app);
}

async function effectsOf(scope) {
  return effects(pool, scope);
}

test('a request without the key is refused with 400 problem details; the handler never runs', async () => {
  const route = `/${unique('missing')}`;
  let ran = 0;
  const server = await appWith({}, route, async () => { ran += 1; return { ok: true }; });
  try {
    const answer = await post(server.base, route, { body: { item: 'tea' } });
    assert.equal(answer.status, 400);
    assert.match(answer.headers.get('content-type'), /^application\/problem\+json/);
    const problem = JSON.parse(answer.text);
    assert.equal(problem.status, 400);
    assert.equal(problem.sqlstate, 'P4001');
    assert.equal(ran, 0);
  } finally { await server.close(); }
});

test('the first answer is sent as the handler made it; a replay has its status, allow-listed headers and bytes', async () => {
  const route = `/${unique('replay')}`;
  const server = await appWith({ replayHeaders: ['X-Order-Id'] }, route, async (request, reply, effect) => {
    const id = await effect();
    reply.code(201)
      .header('Location', `/orders/${id}`)
      .header('ETag', `"v${id}"`)
      .header('X-Order-Id', String(id))
      .header('Cache-Control', 'no-store')
      .header('X-Request-Id', randomUUID());
    return { order_id: id, item: request.body.item };
  });
  try {
    const first = await post(server.base, route, { key: 'k-1', body: '{"quantity": 2, "item": "tea"}' });
    assert.equal(first.status, 201, first.text);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.match(first.headers.get('location'), /^\/orders\/\d+$/);
    assert.ok(first.headers.get('x-request-id'), 'the first answer has all its headers');
    // The same document in another spelling and the key as a Structured Field string: one request.
    const again = await post(server.base, route, { key: '"k-1"', body: '{"item":"tea","quantity":2.0}' });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.bytes, first.bytes);
    assert.equal(again.headers.get('content-length'), String(first.bytes.length));
    for (const name of ['content-type', 'location', 'etag', 'x-order-id', 'cache-control']) {
      assert.equal(again.headers.get(name), first.headers.get(name), name);
    }
    assert.equal(again.headers.get('x-request-id'), null, 'a header outside the allow-list is not replayed');
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test('a text answer, a Buffer and a stream are stored as their bytes and replayed with their content-type', async () => {
  const route = `/${unique('bodies')}`;
  const binary = Buffer.from([0xff, 0xd8, 0x00, 0x01, 0xfe, 0x80]);
  const server = await appWith({}, route, async (request, reply, effect) => {
    const id = await effect();
    const kind = request.headers['x-kind'];
    reply.code(201);
    if (kind === 'text') return `created ${id} \u00e9`;
    if (kind === 'buffer') return reply.type('application/octet-stream').send(Buffer.concat([binary, Buffer.from(String(id))]));
    if (kind === 'response') return new Response(`order ${id}`, { status: 202, headers: { 'content-type': 'text/x-order', location: `/orders/${id}` } });
    return reply.type('text/csv').send(Readable.from([Buffer.from('id,item\n'), Buffer.from(`${id},tea\n`)]));
  });
  try {
    for (const kind of ['text', 'buffer', 'stream', 'response']) {
      const options = { key: `k-${kind}`, body: { kind }, headers: { 'x-kind': kind } };
      const first = await post(server.base, route, options);
      assert.equal(first.status, kind === 'response' ? 202 : 201, `${kind}: ${first.text}`);
      const again = await post(server.base, route, options);
      assert.equal(again.status, first.status, kind);
      assert.equal(again.headers.get('idempotent-replayed'), 'true', kind);
      assert.deepEqual(again.bytes, first.bytes, kind);
      assert.equal(again.headers.get('content-type'), first.headers.get('content-type'), kind);
      assert.equal(again.headers.get('location'), first.headers.get('location'), kind);
    }
    const stored = await pool.query(
      "SELECT response_body::text AS stored FROM idem.peek($1, 'k-buffer') WHERE kind IS NOT NULL", [`POST ${route}`])
      .catch(() => null);
    if (stored && stored.rows.length > 0) {
      const envelope = JSON.parse(stored.rows[0].stored);
      assert.equal(envelope.idem_http, 1);
      assert.equal(envelope.body, undefined, 'bytes that are not UTF-8 are stored as base64');
      assert.equal(Buffer.from(envelope.body_base64, 'base64').subarray(0, binary.length).compare(binary), 0);
    }
    assert.equal(await effectsOf(`POST ${route}`), 4);
  } finally { await server.close(); }
});

test('a hijacked reply records nothing: its transaction rolls back and the key is given up', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const route = `/${unique('hijack')}`;
  const server = await appWith({}, route, async (request, reply, effect) => {
    await effect();
    if (request.body.raw) {
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/plain' });
      reply.raw.end('written by hand');
      return reply;
    }
    return reply.code(201).send({ ok: true });
  });
  try {
    const hijacked = await post(server.base, route, { key: 'k', body: { raw: true } });
    assert.equal(hijacked.text, 'written by hand');
    const next = await until(async () => {
      const a = await post(server.base, route, { key: 'k', body: { raw: false } });
      return a.status === 409 ? null : a;
    }, 'the hijacked request to give its key up');
    assert.equal(next.status, 201, next.text);
    assert.equal(next.headers.get('idempotent-replayed'), null);
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test('a 204 replays as a 204 without a body or a content-type', async () => {
  const route = `/${unique('nocontent')}`;
  const server = await appWith({}, route, async (request, reply, effect) => {
    await effect();
    return reply.code(204).send();
  });
  try {
    const first = await post(server.base, route, { key: 'k', body: {} });
    assert.equal(first.status, 204);
    const again = await post(server.base, route, { key: 'k', body: {} });
    assert.equal(again.status, 204);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('content-type'), null);
    assert.equal(again.bytes.length, 0);
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test("a 4xx answer is stored and replayed; the handler's writes commit with it", async () => {
  const route = `/${unique('final')}`;
  const server = await appWith({}, route, async (request, reply, effect) => {
    await effect('refusal');
    return reply.code(402).send({ error: 'card declined' });
  });
  try {
    const first = await post(server.base, route, { key: 'k', body: { amount: 9999 } });
    assert.equal(first.status, 402);
    const again = await post(server.base, route, { key: 'k', body: { amount: 9999 } });
    assert.equal(again.status, 402);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.bytes, first.bytes);
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test('a 5xx or a thrown error stores nothing, rolls the writes back and frees the key', async (t) => {
  if (!(await hasAdapterCalls(pool))) return t.skip('this idem has no idem.release (1.2)');
  const route = `/${unique('release')}`;
  const server = await appWith({}, route, async (request, reply, effect) => {
    await effect();
    if (request.body.quantity === 0) throw new Error('quantity must be positive');
    if (request.body.quantity < 0) return reply.code(503).send({ error: 'try again' });
    return reply.code(201).send({ ok: true });
  });
  try {
    const thrown = await post(server.base, route, { key: 'k', body: { quantity: 0 } });
    assert.equal(thrown.status, 500);
    assert.equal(await effectsOf(`POST ${route}`), 0);
    const unavailable = await post(server.base, route, { key: 'k', body: { quantity: -1 } });
    assert.equal(unavailable.status, 503);
    assert.equal(JSON.parse(unavailable.text).error, 'try again', 'the 5xx is sent as the handler made it');
    assert.equal(await effectsOf(`POST ${route}`), 0);
    const corrected = await post(server.base, route, { key: 'k', body: { quantity: 1 } });
    assert.equal(corrected.status, 201);
    assert.equal(corrected.headers.get('idempotent-replayed'), null);
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test("onError 'fail': after a 5xx only the same body may retry the key", async () => {
  const route = `/${unique('fail')}`;
  let fail = true;
  const server = await appWith({ onError: 'fail' }, route, async (request, reply, effect) => {
    await effect();
    if (fail) throw new Error('a dependency is down');
    return reply.code(201).send({ ok: true });
  });
  try {
    const body = { item: 'tea', quantity: 1 };
    assert.equal((await post(server.base, route, { key: 'k', body })).status, 500);
    assert.equal((await post(server.base, route, { key: 'k', body: { item: 'tea', quantity: 2 } })).status, 422);
    fail = false;
    assert.equal((await post(server.base, route, { key: 'k', body })).status, 201);
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { await server.close(); }
});

test("phases: a committed recovery point survives a failure, and the retry resumes after it", async () => {
  const route = `/${unique('phases')}`;
  let attempts = 0;
  const server = await appWith({ onError: 'fail' }, route, async (request, reply, effect) => {
    attempts += 1;
    const db = request.idem.client;
    const resumedFrom = request.idem.recoveryPoint;
    if (resumedFrom !== 'charged') {
      await effect('charge');
      await request.idem.setRecoveryPoint('charged');
      await db.query('COMMIT');
      await db.query('BEGIN');
      if (attempts === 1) throw new Error('the order service is down');
    }
    await effect('order');
    return reply.code(201).send({ resumed_from: resumedFrom, kind: request.idem.kind });
  });
  try {
    const body = { item: 'tea' };
    assert.equal((await post(server.base, route, { key: 'k', body })).status, 500);
    const retry = await post(server.base, route, { key: 'k', body });
    assert.equal(retry.status, 201, retry.text);
    assert.deepEqual(JSON.parse(retry.text), { resumed_from: 'charged', kind: 'retryable_failure' });
    const { rows } = await pool.query(
      'SELECT what, count(*)::int AS n FROM node_test.effects WHERE scope = $1 GROUP BY what ORDER BY what', [`POST ${route}`]);
    assert.deepEqual(rows, [{ what: 'charge', n: 1 }, { what: 'order', n: 1 }]);
  } finally { await server.close(); }
});

test('a reused key with another body is 422 problem details with its SQLSTATE', async () => {
  const route = `/${unique('mismatch')}`;
  const server = await appWith({}, route, async (request, reply, effect) => {
    await effect();
    return reply.code(201).send({ ok: true });
  });
  try {
    assert.equal((await post(server.base, route, { key: 'k', body: { item: 'tea', quantity: 1 } })).status, 201);
    const other = await post(server.base, route, { key: 'k', body: { item: 'tea', quantity: 9 } });
    assert.equal(other.status, 422);
    assert.match(other.headers.get('content-type'), /^application\/problem\+json/);
    assert.equal(JSON.parse(other.text).sqlstate, 'P4002');
    if (await hasAdapterCalls(pool)) assert.equal(JSON.parse(other.text).stored_status, 'succeeded');
    // Text is fingerprinted by its bytes: other spacing is another request.
    const text = { 'Content-Type': 'text/plain' };
    assert.equal((await post(server.base, route, { key: 't', body: '{ "a": 1 }', headers: text })).status, 201);
    assert.equal((await post(server.base, route, { key: 't', body: '{ "a": 1 }', headers: text })).status, 201);
    const respaced = await post(server.base, route, { key: 't', body: '{"a":1}', headers: text });
    assert.equal(respaced.status, 422);
    assert.equal(await effectsOf(`POST ${route}`), 2);
  } finally { await server.close(); }
});

test('a key too long, an inexact number and a scope over 255 characters are 400 with their SQLSTATE', async () => {
  const route = `/${unique('bad')}`;
  const server = await appWith({ scope: (request) => request.headers['x-scope'] || 'orders' }, route,
    async (request, reply, effect) => { await effect(); return reply.code(201).send({ ok: true }); });
  try {
    const long = await post(server.base, route, { key: 'x'.repeat(256), body: { item: 'tea' } });
    assert.equal(long.status, 400);
    assert.equal(JSON.parse(long.text).sqlstate, 'P4001');
    const inexact = await post(server.base, route, { key: 'k', body: '{"amount": 12345678901234567890}' });
    assert.equal(inexact.status, 400);
    assert.equal(JSON.parse(inexact.text).sqlstate, 'P4005');
    const scope = await post(server.base, route, { key: 'k', body: { item: 'tea' }, headers: { 'x-scope': 's'.repeat(256) } });
    assert.equal(scope.status, 400, scope.text);
    assert.match(scope.headers.get('content-type'), /^application\/problem\+json/);
    assert.match(JSON.parse(scope.text).sqlstate, /^P400[04]$/);
    assert.equal(await effectsOf('orders'), 0);
  } finally { await server.close(); }
});

test('a concurrent twin gets 409 with Retry-After; with wait it gets the replay', async () => {
  const route = `/${unique('twin')}`;
  const held = gate();
  const started = gate();
  const handle = async (request, reply, effect) => {
    const id = await effect();
    if (request.headers['x-hold']) { started.open(); await held.promise; }
    return reply.code(201).header('location', `/orders/${id}`).send({ id });
  };
  const server = await appWith({}, route, handle);
  const waiting = await appWith({ wait: 30 }, route, handle);
  try {
    const body = { item: 'tea', quantity: 1 };
    const original = post(server.base, route, { key: 'k', body, headers: { 'x-hold': '1' } });
    await started.promise;
    const twin = await post(server.base, route, { key: 'k', body });
    assert.equal(twin.status, 409);
    assert.match(twin.headers.get('content-type'), /^application\/problem\+json/);
    assert.match(twin.headers.get('retry-after'), /^[0-9]+$/);
    const waiter = post(waiting.base, route, { key: 'k', body });
    // The waiter is inside claim_or_wait before the owner finishes.
    await until(async () => {
      const { rows } = await pool.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%claim_or_wait%' AND state = 'active' AND pid <> pg_backend_pid()");
      return rows[0].n > 0;
    }, 'the waiter to wait');
    held.open();
    const first = await original;
    assert.equal(first.status, 201);
    const waited = await waiter;
    assert.equal(waited.status, 201);
    assert.equal(waited.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(waited.bytes, first.bytes);
    assert.equal(waited.headers.get('location'), first.headers.get('location'));
    assert.equal(await effectsOf(`POST ${route}`), 1);
  } finally { held.open(); await server.close(); await waiting.close(); }
});

test('a retry after the lock expired takes over; the slow original is rolled back and answers 409', async () => {
  const route = `/${unique('expired')}`;
  const held = gate();
  const started = gate();
  const server = await appWith({ lockTimeout: 1 }, route, async (request, reply, effect) => {
    const id = await effect();
    if (request.headers['x-hold']) { started.open(); await held.promise; }
    return reply.code(201).header('location', `/orders/${id}`).send({ id });
  });
  try {
    const body = { item: 'tea', quantity: 1 };
    const original = post(server.base, route, { key: 'k', body, headers: { 'x-hold': '1' } });
    await started.promise;
    const retry = await until(async () => {
      const a = await post(server.base, route, { key: 'k', body });
      return a.status === 409 ? null : a;
    }, 'the lock to expire');
    assert.equal(retry.status, 201);
    held.open();
    const late = await original;
    assert.equal(late.status, 409, 'the original lost its key to the retry');
    assert.match(late.headers.get('content-type'), /^application\/problem\+json/);
    assert.equal(JSON.parse(late.text).sqlstate, 'P4012');
    assert.equal(late.headers.get('location'), null, "none of the handler's headers");
    assert.equal(await effectsOf(`POST ${route}`), 1);
    const replay = await post(server.base, route, { key: 'k', body });
    assert.deepEqual(replay.bytes, retry.bytes);
    assert.equal(replay.headers.get('location'), retry.headers.get('location'));
  } finally { held.open(); await server.close(); }
});

test('the default scope is the method and the path: the same key and body for two accounts are two operations', async () => {
  const account = unique('acct');
  const route = '/accounts/:account/charges';
  const server = await appWith({}, route, async (request, reply, effect) => {
    const id = await effect();
    return reply.code(201).send({ charge: `${request.params.account}-${id}` });
  });
  try {
    const body = { amount: 100 };
    const a = await post(server.base, `/accounts/${account}-A/charges?source=web`, { key: 'k', body });
    assert.equal(a.status, 201);
    const b = await post(server.base, `/accounts/${account}-B/charges`, { key: 'k', body });
    assert.equal(b.status, 201);
    assert.equal(b.headers.get('idempotent-replayed'), null, 'B is not A\'s replay');
    assert.notDeepEqual(b.bytes, a.bytes);
    // The query string is not part of the scope: the same operation.
    const aAgain = await post(server.base, `/accounts/${account}-A/charges`, { key: 'k', body });
    assert.equal(aAgain.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(aAgain.bytes, a.bytes);
    assert.equal(await effectsOf(`POST /accounts/${account}-A/charges`), 1);
    assert.equal(await effectsOf(`POST /accounts/${account}-B/charges`), 1);
  } finally { await server.close(); }
});

test('the principal hook prefixes the scope: one key per account, whatever the path', async () => {
  const route = `/${unique('charges')}`;
  const server = await appWith({ principal: (request) => request.headers['x-account'] || null, scope: 'charges' }, route,
    async (request, reply, effect) => {
      const id = await effect();
      return reply.code(201).send({ scope: request.idem.scope, id });
    });
  try {
    const body = { amount: 100 };
    const tenant = unique('tenant');
    const a = await post(server.base, route, { key: 'k', body, headers: { 'x-account': `${tenant}-A` } });
    const b = await post(server.base, route, { key: 'k', body, headers: { 'x-account': `${tenant}-B` } });
    assert.equal(JSON.parse(a.text).scope, `${tenant}-A charges`);
    assert.equal(JSON.parse(b.text).scope, `${tenant}-B charges`);
    assert.equal(b.headers.get('idempotent-replayed'), null);
    const again = await post(server.base, route, { key: 'k', body, headers: { 'x-account': `${tenant}-A` } });
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.bytes, a.bytes);
    assert.equal(await effectsOf(`${tenant}-A charges`), 1);
    assert.equal(await effectsOf(`${tenant}-B charges`), 1);
  } finally { await server.close(); }
});

test("the plugin covers its context's POST and PATCH routes and its children's; config.idempotency opts a route out or in", async () => {
  const app = Fastify();
  const base = `/${unique('routes')}`;
  // A context registered before the plugin gets its hooks too: Fastify adds a hook to every child.
  app.register(async (child) => {
    child.post(`${base}/earlier-child`, async (request) => ({ idem: request.idem === null }));
  });
  app.post(`${base}/before`, async (request) => ({ scope: request.idem.scope }));
  // Not awaited: the routes declared below are covered all the same.
  app.register(idempotency, { pool });
  app.get(`${base}/read`, async (request) => ({ idem: request.idem === null }));
  app.post(`${base}/out`, { config: { idempotency: false } }, async (request) => ({ idem: request.idem === null }));
  app.put(`${base}/in`, { config: { idempotency: { wait: 1, scope: 'puts' } } }, async (request) => ({ scope: request.idem.scope }));
  app.patch(`${base}/patch`, async (request) => ({ scope: request.idem.scope }));
  app.register(async (child) => {
    child.post(`${base}/child`, async (request) => ({ scope: request.idem.scope }));
  });
  const server = await listenFastify(app);
  try {
    const call = (method, p, key) => fetch(server.base + p, {
      method, headers: key ? { 'Idempotency-Key': key } : {},
    }).then(async (r) => ({ status: r.status, body: await r.text(), replayed: r.headers.get('idempotent-replayed') }));
    assert.equal((await call('POST', `${base}/earlier-child`, 'k')).body, '{"idem":false}');
    assert.equal((await call('POST', `${base}/before`)).status, 400);
    assert.equal((await call('POST', `${base}/before`, 'k')).body, `{"scope":"POST ${base}/before"}`);
    assert.equal((await call('GET', `${base}/read`)).body, '{"idem":true}');
    assert.equal((await call('POST', `${base}/out`)).body, '{"idem":true}');
    assert.equal((await call('PUT', `${base}/in`)).status, 400);
    const key = unique('k');
    assert.equal((await call('PUT', `${base}/in`, key)).body, '{"scope":"puts"}');
    assert.equal((await call('PUT', `${base}/in`, key)).replayed, 'true');
    assert.equal((await call('PATCH', `${base}/patch`)).status, 400);
    const patched = await call('PATCH', `${base}/patch`, 'k');
    assert.equal(patched.body, `{"scope":"PATCH ${base}/patch"}`);
    assert.equal((await call('PATCH', `${base}/patch`, 'k')).replayed, 'true');
    assert.equal((await call('POST', `${base}/child`, 'k')).body, `{"scope":"POST ${base}/child"}`);
    // Not a route: Fastify's 404, not a claimed key.
    assert.equal((await call('POST', `${base}/nowhere`, 'k')).status, 404);
    assert.equal((await call('POST', `${base}/nowhere`, 'k')).replayed, null);
  } finally { await server.close(); }
});

test('bad options are refused when the plugin or the route is registered', async () => {
  await assert.rejects(async () => { await Fastify().register(idempotency, {}); }, /pool is required/);
  await assert.rejects(async () => { await Fastify().register(idempotency, { pool, onError: 'ignore' }); }, /onError/);
  const app = Fastify();
  await app.register(idempotency, { pool });
  assert.throws(() => app.post('/x', { config: { idempotency: { wait: -1 } } }, async () => ({})), /positive/);
});

test('an answer stored by SQL code replays as JSON; one from a newer package is a 500 problem', async () => {
  const route = `/${unique('legacy')}`;
  let ran = 0;
  const server = await appWith({}, route, async () => { ran += 1; return { ran }; });
  const scope = `POST ${route}`;
  try {
    const { requestHash } = require('../lib/jcs');
    const body = '{"item":"tea"}';
    for (const [key, stored, code] of [['legacy', '{"order_id": 7}', 201], ['newer', '{"idem_http": 2, "body": "x"}', 201], ['empty', null, 204]]) {
      const { rows: [claim] } = await pool.query(
        'SELECT kind::text, fence FROM idem.claim_idempotency_key($1, $2, $3)', [scope, key, requestHash(Buffer.from(body))]);
      assert.equal(claim.kind, 'new_claim');
      await pool.query('SELECT idem.mark_succeeded($1, $2, $3, $4, $5::jsonb)', [scope, key, claim.fence, code, stored]);
    }
    const legacy = await post(server.base, route, { key: 'legacy', body });
    assert.equal(legacy.status, 201);
    assert.equal(legacy.headers.get('idempotent-replayed'), 'true');
    assert.match(legacy.headers.get('content-type'), /^application\/json/);
    assert.deepEqual(JSON.parse(legacy.text), { order_id: 7 });
    const empty = await post(server.base, route, { key: 'empty', body });
    assert.equal(empty.status, 204);
    assert.equal(empty.headers.get('content-type'), null);
    const newer = await post(server.base, route, { key: 'newer', body });
    assert.equal(newer.status, 500);
    assert.match(newer.headers.get('content-type'), /^application\/problem\+json/);
    assert.match(JSON.parse(newer.text).detail, /newer version/);
    assert.equal(ran, 0);
  } finally { await server.close(); }
});
