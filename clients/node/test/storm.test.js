// A storm: 32 concurrent clients send 500 keys three times each (1500
// requests, shuffled), and the handler fails at random, before or after its
// effect. A client resends on 409 and 5xx, as the draft asks. Every key's
// effect must happen exactly once, and every answer a key got must be the
// same bytes.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const express = require('express');
const { idempotency } = require('..');
const { makePool, scopeFor, listen, post, hasAdapterCalls } = require('./helpers');

const KEYS = 500;
const DUPLICATES = 3;
const CLIENTS = 32;

test(`storm: ${CLIENTS} clients, ${KEYS} keys x ${DUPLICATES} duplicates, random failures`, async () => {
  const pool = makePool(40);
  const scope = scopeFor('storm');
  let injected = 0;
  const app = express();
  // claim_or_wait: a duplicate waits for its twin's outcome instead of a 409.
  // A failed attempt releases its key (idem 1.2), or leaves it to a retry.
  const onError = (await hasAdapterCalls(pool)) ? 'release' : 'fail';
  app.post('/orders', idempotency({ pool, scope, wait: 10, lockTimeout: 30, onError }), async (req, res, next) => {
    try {
      const roll = Math.random();
      if (roll < 0.1) { injected += 1; throw new Error('failure before the effect'); }
      const { rows } = await req.idem.client.query(
        'INSERT INTO node_test.effects (scope, key, body) VALUES ($1, $2, $3) RETURNING id',
        [scope, req.idem.key, req.body]);
      if (roll < 0.2) { injected += 1; throw new Error('failure after the effect'); }
      res.status(201).json({ order_id: Number(rows[0].id), key: req.idem.key });
    } catch (error) {
      next(error);
    }
  });
  app.use((error, req, res, next) => res.status(500).json({ error: error.message })); // eslint-disable-line no-unused-vars
  const server = await listen(app);
  const work = [];
  for (let k = 0; k < KEYS; k += 1) for (let d = 0; d < DUPLICATES; d += 1) work.push(`key-${k}`);
  for (let i = work.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [work[i], work[j]] = [work[j], work[i]];
  }
  const answers = new Map();
  let requests = 0;
  let resent = 0;
  let replays = 0;
  const deadline = Date.now() + 300000;
  async function client() {
    while (work.length > 0) {
      const key = work.pop();
      for (;;) {
        assert.ok(Date.now() < deadline, 'the storm took longer than its deadline');
        requests += 1;
        const answer = await post(server.base, '/orders', { key, body: { item: key, quantity: 1 } });
        if (answer.status === 409 || answer.status >= 500) { resent += 1; continue; }
        assert.equal(answer.status, 201, answer.text);
        if (answer.headers.get('idempotent-replayed') === 'true') replays += 1;
        if (!answers.has(key)) answers.set(key, []);
        answers.get(key).push(answer.text);
        break;
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: CLIENTS }, client));
    const { rows: [counts] } = await pool.query(
      `SELECT count(*)::int AS effects, count(DISTINCT key)::int AS keys
         FROM node_test.effects WHERE scope = $1`, [scope]);
    const duplicates = counts.effects - counts.keys;
    console.log(`storm: requests ${requests} (resent ${resent}), effects ${counts.effects}, duplicates ${duplicates}, ` +
      `replays ${replays}, failures injected ${injected} (onError ${onError})`);
    assert.equal(counts.keys, KEYS);
    assert.equal(counts.effects, KEYS);
    assert.equal(duplicates, 0);
    assert.equal(answers.size, KEYS);
    for (const [key, texts] of answers) {
      assert.equal(texts.length, DUPLICATES);
      assert.ok(texts.every((t) => t === texts[0]), `every answer for ${key} is the same bytes`);
    }
    assert.ok(injected > 0, 'some failures were injected');
  } finally {
    await server.close();
    await pool.end();
  }
});
