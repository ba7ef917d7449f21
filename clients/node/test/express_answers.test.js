// The whole answer replayed: allow-listed headers (and replayHeaders), text,
// sendStatus, bytes that are not UTF-8, 204 without a content-type, answers
// stored by SQL code or an earlier version (legacy JSON), and the default
// scope: '<METHOD> <path>', per principal. On Express 5 and Express 4.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, scopeFor, listen, post, effects } = require('./helpers');

const pool = makePool(20);
test.after(() => pool.end());

// Effects of the tests that run under the default scope: tagged by a run id in the key.
async function effectsOfKey(key) {
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM node_test.effects WHERE key = $1', [key]);
  return rows[0].n;
}

async function effect(req, scope) {
  const { rows } = await req.idem.client.query(
    'INSERT INTO node_test.effects (scope, key) VALUES ($1, $2) RETURNING id', [scope, req.idem.key]);
  return Number(rows[0].id);
}

function headersOf(answer, names) {
  return Object.fromEntries(names.map((n) => [n, answer.headers.get(n)]));
}

for (const { name, express } of EXPRESS_VERSIONS) test.describe(name, () => {
  test('allow-listed headers and replayHeaders replay; others do not; same bytes', async () => {
    const scope = scopeFor('headers');
    const app = express();
    app.post('/orders', idempotency({ pool, scope, replayHeaders: ['X-Order-Id'] }), async (req, res) => {
      const id = await effect(req, scope);
      res.status(201).location(`/orders/${id}`).set('X-Order-Id', String(id)).set('Cache-Control', 'no-store')
        .set('X-Request-Noise', `n-${id}`).append('Link', '</a>; rel="a"').json({ id });
    });
    const server = await listen(app);
    try {
      const first = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(first.status, 201);
      assert.equal(first.headers.get('x-request-noise') !== null, true, 'the first answer carries every header');
      const again = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(again.status, 201);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(again.bytes, first.bytes);
      const kept = ['location', 'x-order-id', 'cache-control', 'content-type', 'etag'];
      assert.deepEqual(headersOf(again, kept), headersOf(first, kept));
      assert.match(again.headers.get('location'), /^\/orders\/\d+$/);
      assert.equal(again.headers.get('x-request-noise'), null);
      assert.equal(again.headers.get('link'), null);
      assert.equal(again.headers.get('content-length'), String(first.bytes.length));
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test("non-JSON answers: res.send('created 17'), sendStatus(201), bytes that are not UTF-8", async () => {
    const scope = scopeFor('text');
    const app = express();
    app.post('/text', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.status(201).send(`created ${req.body.n}`);
    });
    app.post('/status', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.sendStatus(201);
    });
    const binary = Buffer.from([0xff, 0x00, 0xfe, 0x41, 0xc3]);
    app.post('/binary', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.status(200).type('application/octet-stream').send(binary);
    });
    const server = await listen(app);
    try {
      for (const [path, contentType] of [['/text', /^text\/html/], ['/status', /^text\/plain/], ['/binary', /^application\/octet-stream/]]) {
        const first = await post(server.base, path, { key: `k${path}`, body: { n: 17 } });
        assert.ok(first.status === 201 || first.status === 200, `${path}: ${first.status} ${first.text}`);
        assert.match(first.headers.get('content-type'), contentType);
        const again = await post(server.base, path, { key: `k${path}`, body: { n: 17 } });
        assert.equal(again.status, first.status);
        assert.equal(again.headers.get('idempotent-replayed'), 'true');
        assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
        assert.deepEqual(again.bytes, first.bytes, `${path}: the same bytes`);
      }
      const text = await post(server.base, '/text', { key: 'k/text', body: { n: 17 } });
      assert.equal(text.text, 'created 17');
      const bytes = await post(server.base, '/binary', { key: 'k/binary', body: { n: 17 } });
      assert.deepEqual(bytes.bytes, binary);
      const { rows } = await pool.query(
        "SELECT response_body ? 'body_base64' AS b64 FROM idem.peek($1, 'k/binary')", [scope]);
      assert.equal(rows[0].b64, true, 'bytes that are not UTF-8 are stored as base64');
      assert.equal(await effects(pool, scope), 3);
    } finally { await server.close(); }
  });

  test("headers earlier middleware set (CORS) stay on first answers, replays and problems", async () => {
    const scope = scopeFor('cors');
    const app = express();
    app.use((req, res, next) => { res.set('Access-Control-Allow-Origin', '*'); next(); });
    app.post('/orders', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.status(201).json({ ok: true });
    });
    const server = await listen(app);
    try {
      const first = await post(server.base, '/orders', { key: 'k', body: {} });
      const again = await post(server.base, '/orders', { key: 'k', body: {} });
      const missing = await post(server.base, '/orders', { body: {} });
      assert.deepEqual([first.status, again.status, missing.status], [201, 201, 400]);
      for (const a of [first, again, missing]) assert.equal(a.headers.get('access-control-allow-origin'), '*');
    } finally { await server.close(); }
  });

  test('a 204 replays without a content-type or a body', async () => {
    const scope = scopeFor('nocontent');
    const app = express();
    app.delete('/orders/:id', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.status(204).end();
    });
    const server = await listen(app);
    try {
      const call = () => fetch(`${server.base}/orders/7`, { method: 'DELETE', headers: { 'Idempotency-Key': 'k' } });
      const first = await call();
      assert.equal(first.status, 204);
      const again = await call();
      assert.equal(again.status, 204);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.headers.get('content-type'), null);
      assert.equal((await again.arrayBuffer()).byteLength, 0);
      assert.equal(await effects(pool, scope), 1);
    } finally { await server.close(); }
  });

  test('an answer stored as JSON by SQL code (mark_succeeded) replays as application/json', async () => {
    const scope = scopeFor('legacy');
    const { rows: [c] } = await pool.query(
      "SELECT fence FROM idem.claim_idempotency_key($1, 'k', idem.request_hash('{\"item\":\"tea\"}'::jsonb))", [scope]);
    await pool.query("SELECT idem.mark_succeeded($1, 'k', $2, 201, '{\"order_id\": 5, \"item\": \"tea\"}'::jsonb)", [scope, c.fence]);
    const { rows: [none] } = await pool.query(
      "SELECT fence FROM idem.claim_idempotency_key($1, 'k-null', idem.request_hash('{\"item\":\"tea\"}'::jsonb))", [scope]);
    await pool.query("SELECT idem.mark_succeeded($1, 'k-null', $2, 202, NULL)", [scope, none.fence]);
    const app = express();
    app.post('/orders', idempotency({ pool, scope }), (req, res) => res.status(500).send('the handler must not run'));
    const server = await listen(app);
    try {
      const legacy = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(legacy.status, 201);
      assert.equal(legacy.headers.get('idempotent-replayed'), 'true');
      assert.equal(legacy.headers.get('content-type'), 'application/json');
      assert.deepEqual(JSON.parse(legacy.text), { order_id: 5, item: 'tea' });
      const empty = await post(server.base, '/orders', { key: 'k-null', body: { item: 'tea' } });
      assert.equal(empty.status, 202);
      assert.equal(empty.headers.get('content-type'), null);
      assert.equal(empty.bytes.length, 0);
    } finally { await server.close(); }
  });

  test('an answer stored by a newer version of the package is a 500 problem, not a guess', async () => {
    const scope = scopeFor('newer');
    const { rows: [c] } = await pool.query(
      "SELECT fence FROM idem.claim_idempotency_key($1, 'k', idem.request_hash('{\"item\":\"tea\"}'::jsonb))", [scope]);
    await pool.query(`SELECT idem.mark_succeeded($1, 'k', $2, 201, '{"idem_http": 2, "parts": []}'::jsonb)`, [scope, c.fence]);
    const app = express();
    app.post('/orders', idempotency({ pool, scope }), (req, res) => res.status(201).send('must not run'));
    const server = await listen(app);
    try {
      const answer = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
      assert.equal(answer.status, 500);
      assert.match(JSON.parse(answer.text).detail, /newer version/);
    } finally { await server.close(); }
  });

  test('the default scope is <METHOD> <path>: one key on two accounts is two requests', async () => {
    const app = express();
    const router = express.Router();
    router.post('/accounts/:account/charges', idempotency({ pool }), async (req, res) => {
      const { rows } = await req.idem.client.query(
        'INSERT INTO node_test.effects (scope, key, what) VALUES ($1, $2, $3) RETURNING id',
        [req.idem.scope, req.idem.key, req.params.account]);
      res.status(201).json({ charge: Number(rows[0].id), account: req.params.account });
    });
    app.use('/v1', router);
    const server = await listen(app);
    const key = scopeFor('cross-account');
    try {
      const body = { amount: 100 };
      const a = await post(server.base, '/v1/accounts/A/charges?expand=x', { key, body });
      assert.equal(a.status, 201);
      const b = await post(server.base, '/v1/accounts/B/charges', { key, body });
      assert.equal(b.status, 201);
      assert.equal(b.headers.get('idempotent-replayed'), null, 'B is not given A\'s answer');
      assert.equal(JSON.parse(b.text).account, 'B');
      const again = await post(server.base, '/v1/accounts/A/charges', { key, body });
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(again.bytes, a.bytes);
      const { rows } = await pool.query('SELECT scope FROM node_test.effects WHERE key = $1 ORDER BY id', [key]);
      assert.deepEqual(rows.map((r) => r.scope), ['POST /v1/accounts/A/charges', 'POST /v1/accounts/B/charges']);
    } finally { await server.close(); }
  });

  test('principal: keys are per account, the scope starts with it', async () => {
    const app = express();
    const principal = (req) => req.get('x-account') || null;
    app.post('/charges', idempotency({ pool, principal }), async (req, res) => {
      const { rows } = await req.idem.client.query(
        'INSERT INTO node_test.effects (scope, key) VALUES ($1, $2) RETURNING id', [req.idem.scope, req.idem.key]);
      res.status(201).json({ charge: Number(rows[0].id) });
    });
    app.post('/refunds', idempotency({ pool, principal, scope: 'refunds' }), async (req, res) => {
      const { rows } = await req.idem.client.query(
        'INSERT INTO node_test.effects (scope, key) VALUES ($1, $2) RETURNING id', [req.idem.scope, req.idem.key]);
      res.status(201).json({ refund: Number(rows[0].id) });
    });
    const server = await listen(app);
    const key = scopeFor('principal');
    try {
      const body = { amount: 5 };
      const acme = await post(server.base, '/charges', { key, body, headers: { 'X-Account': 'acme' } });
      const umbrella = await post(server.base, '/charges', { key, body, headers: { 'X-Account': 'umbrella' } });
      assert.equal(umbrella.headers.get('idempotent-replayed'), null);
      assert.notDeepEqual(umbrella.bytes, acme.bytes);
      const acmeAgain = await post(server.base, '/charges', { key, body, headers: { 'X-Account': 'acme' } });
      assert.equal(acmeAgain.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(acmeAgain.bytes, acme.bytes);
      await post(server.base, '/refunds', { key, body, headers: { 'X-Account': 'acme' } });
      await post(server.base, '/charges', { key, body }); // no principal: the path alone
      const { rows } = await pool.query('SELECT scope FROM node_test.effects WHERE key = $1 ORDER BY id', [key]);
      assert.deepEqual(rows.map((r) => r.scope), ['acme POST /charges', 'umbrella POST /charges', 'acme refunds', 'POST /charges']);
      assert.equal(await effectsOfKey(key), 4);
    } finally { await server.close(); }
  });

  test('a scope over 255 characters is a 400 problem with its SQLSTATE', async () => {
    const app = express();
    app.post('/orders/:name', idempotency({ pool }), (req, res) => res.status(201).send('must not run'));
    const server = await listen(app);
    try {
      const answer = await post(server.base, `/orders/${'x'.repeat(260)}`, { key: 'k', body: { item: 'tea' } });
      assert.equal(answer.status, 400);
      assert.equal(JSON.parse(answer.text).sqlstate, 'P4000');
    } finally { await server.close(); }
  });

  test('a body that is not JSON is fingerprinted by its bytes; a JSON one canonically', async () => {
    const scope = scopeFor('bytes');
    const app = express();
    app.post('/upload', idempotency({ pool, scope }), async (req, res) => {
      await effect(req, scope);
      res.status(201).type('text/plain').send(`got ${Buffer.isBuffer(req.body) ? req.body.length : typeof req.body} bytes`);
    });
    const server = await listen(app);
    try {
      const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
      const first = await post(server.base, '/upload', { key: 'k', body: 'a=1&b=2', headers: form });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.text, 'got 7 bytes');
      const again = await post(server.base, '/upload', { key: 'k', body: 'a=1&b=2', headers: form });
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      const other = await post(server.base, '/upload', { key: 'k', body: 'b=2&a=1', headers: form });
      assert.equal(other.status, 422, 'other bytes are another request');
      const vnd = { 'Content-Type': 'application/vnd.api+json' };
      assert.equal((await post(server.base, '/upload', { key: 'j', body: '{"a": 1.0}', headers: vnd })).status, 201);
      const spelled = await post(server.base, '/upload', { key: 'j', body: '{"a":1}', headers: vnd });
      assert.equal(spelled.headers.get('idempotent-replayed'), 'true', '+json is JSON');
      assert.equal(await effects(pool, scope), 2);
    } finally { await server.close(); }
  });
});
