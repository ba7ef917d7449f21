// A storm per Express version: 20 concurrent clients send 200 keys three
// times each (600 requests, shuffled), and the handler fails at random 20% of
// the time, before or after its effect. A client resends on 409 and 5xx, as
// the draft asks. Answers carry Location, X-Order-Id (replayHeaders) and
// Cache-Control; every fifth key answers text/plain. Every key's effect must
// happen exactly once, and every answer a key got must be the same bytes
// with the same replayed headers.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, scopeFor, listen, hasAdapterCalls, driveStorm } = require('./helpers');

const KEYS = 200;
const DUPLICATES = 3;
const CLIENTS = 20;
const KEPT = ['content-type', 'location', 'x-order-id', 'cache-control', 'etag'];

for (const { name, express } of EXPRESS_VERSIONS) {
  test(`storm: ${name}: ${CLIENTS} clients, ${KEYS} keys x ${DUPLICATES} duplicates, 20% failures`, async () => {
    const pool = makePool(30);
    const scope = scopeFor('storm');
    let injected = 0;
    const app = express();
    // claim_or_wait: a duplicate waits for its twin's outcome instead of a 409.
    // A failed attempt releases its key (idem 1.2), or leaves it to a retry.
    const onError = (await hasAdapterCalls(pool)) ? 'release' : 'fail';
    app.post('/orders', idempotency({ pool, scope, wait: 10, lockTimeout: 30, onError, replayHeaders: ['X-Order-Id'] }), async (req, res, next) => {
      try {
        const roll = Math.random();
        if (roll < 0.1) { injected += 1; throw new Error('failure before the effect'); }
        const { rows } = await req.idem.client.query(
          'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
          [scope, req.idem.key, req.body]);
        if (roll < 0.2) { injected += 1; throw new Error('failure after the effect'); }
        const id = Number(rows[0].id);
        res.status(201).location(`/orders/${id}`).set('X-Order-Id', String(id)).set('Cache-Control', 'no-store');
        if (req.body.n % 5 === 0) res.type('text/plain').send(`created ${id}`);
        else res.json({ order_id: id, key: req.idem.key });
      } catch (error) {
        next(error);
      }
    });
    app.use((error, req, res, next) => res.status(500).json({ error: error.message })); // eslint-disable-line no-unused-vars
    const server = await listen(app);
    try {
      const { requests, resent, replays, answers } = await driveStorm({
        base: server.base, path: '/orders', keys: KEYS, duplicates: DUPLICATES, clients: CLIENTS,
        body: (key, n) => ({ item: key, n }),
        record: (answer) => ({ bytes: answer.bytes, headers: KEPT.map((h) => answer.headers.get(h)) }),
      });
      const { rows: [counts] } = await pool.query(
        `SELECT count(*)::int AS effects, count(DISTINCT key)::int AS keys
           FROM node_test.effects WHERE scope = $1`, [scope]);
      const duplicates = counts.effects - counts.keys;
      let identical = 0;
      for (const list of answers.values()) {
        identical += list.filter((a) => a.bytes.equals(list[0].bytes) && a.headers.every((h, i) => h === list[0].headers[i])).length - 1;
      }
      console.log(`storm: ${name}: requests ${requests} (resent ${resent}), keys ${counts.keys}, effects ${counts.effects}, duplicates ${duplicates}, ` +
        `replays ${replays}, byte-identical replays with headers ${identical} of ${KEYS * (DUPLICATES - 1)}, failures injected ${injected} (onError ${onError})`);
      assert.equal(counts.keys, KEYS);
      assert.equal(counts.effects, KEYS);
      assert.equal(duplicates, 0);
      assert.equal(answers.size, KEYS);
      for (const [key, list] of answers) {
        assert.equal(list.length, DUPLICATES);
        for (const a of list) {
          assert.ok(a.bytes.equals(list[0].bytes), `every answer for ${key} is the same bytes`);
          assert.deepEqual(a.headers, list[0].headers, `every answer for ${key} has the same headers`);
        }
        assert.ok(list[0].headers[1] && list[0].headers[2] && list[0].headers[3], `${key}: Location, X-Order-Id and Cache-Control are there`);
      }
      assert.equal(identical, KEYS * (DUPLICATES - 1));
      assert.ok(injected > 0, 'some failures were injected');
    } finally {
      await server.close();
      await pool.end();
    }
  });
}
