// Waiting never starves the pool: 30 simultaneous requests of one key, a
// 300 ms handler, wait 5 s, on a pool of 4 and on node-postgres's default
// pool (10). The owner claims and runs its transaction on one connection, a
// waiter waits on its own, and the others queue for a connection: all 30 get
// the owner's answer (one effect, 29 byte-identical replays with headers),
// none a 409. Prints each request's finish time relative to the owner's.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: delay } = require('node:timers/promises');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, scopeFor, listen, post, effects } = require('./helpers');

const TWINS = 30;
const express = EXPRESS_VERSIONS[0].express;

for (const [label, max] of [['a pool of 4', 4], ['the default pool (10)', null]]) {
  test(`pool: ${TWINS} twins on ${label} all get the owner's answer`, async () => {
    const pool = makePool(max);
    const scope = scopeFor('wait');
    const app = express();
    app.post('/orders', idempotency({ pool, scope, wait: 5, replayHeaders: ['x-order-id'] }), async (req, res) => {
      await delay(300); // the handler's work
      const { rows } = await req.idem.client.query(
        'INSERT INTO node_test.effects (scope, key) VALUES ($1, $2) RETURNING id', [scope, req.idem.key]);
      const id = Number(rows[0].id);
      res.status(201).location(`/orders/${id}`).set('X-Order-Id', String(id)).json({ id });
    });
    const server = await listen(app);
    try {
      const started = Date.now();
      const answers = await Promise.all(Array.from({ length: TWINS }, async () => {
        const a = await post(server.base, '/orders', { key: 'k', body: { item: 'tea' } });
        return { ...a, finished: Date.now() - started };
      }));
      const statuses = answers.map((a) => a.status);
      const owners = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') !== 'true');
      const replays = answers.filter((a) => a.headers.get('idempotent-replayed') === 'true');
      const conflicts = statuses.filter((s) => s === 409).length;
      const owner = owners[0];
      assert.ok(owner, 'one request ran the handler');
      const others = answers.filter((a) => a !== owner);
      const after = others.map((a) => a.finished - owner.finished).sort((x, y) => x - y);
      console.log(`pool: ${label}: ${TWINS} requests, 409s ${conflicts}, effects ${await effects(pool, scope)}, ` +
        `replays ${replays.length}; owner finished at ${owner.finished} ms; twins finished ${after[0]}..${after[after.length - 1]} ms ` +
        `after the owner (median ${after[Math.floor(after.length / 2)]}; 409s finished ${answers.filter((a) => a.status === 409).map((a) => a.finished - owner.finished).join(', ') || 'none'})`);
      assert.deepEqual(statuses, Array(TWINS).fill(201));
      assert.equal(owners.length, 1);
      assert.equal(replays.length, TWINS - 1);
      for (const r of replays) {
        assert.deepEqual(r.bytes, owner.bytes);
        for (const h of ['location', 'x-order-id', 'content-type', 'etag']) assert.equal(r.headers.get(h), owner.headers.get(h), h);
      }
      assert.equal(await effects(pool, scope), 1);
    } finally {
      await server.close();
      await pool.end();
    }
  });
}
