// The Powertools storm both wrappers run (makeIdempotent and the Middy
// middleware): 16 concurrent invocations over 100 events x 3, the handler
// failing at random; every event's effect exactly once, and every replay the
// same JSON text as the event's first result. Prints a "powertools storm:"
// line for the suite's log.
'use strict';
const assert = require('node:assert/strict');

async function storm({ pool, scope, invoke, label }) {
  const work = [];
  for (let k = 0; k < 100; k += 1) for (let d = 0; d < 3; d += 1) work.push(k);
  work.sort(() => Math.random() - 0.5);
  const results = new Map(); // event -> the first result's JSON text
  let invocations = 0;
  let replays = 0;
  const deadline = Date.now() + 120000;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (work.length > 0) {
      const k = work.pop();
      for (;;) {
        assert.ok(Date.now() < deadline, 'the storm took longer than its deadline');
        invocations += 1;
        try {
          const r = JSON.stringify(await invoke({ orderId: `e-${k}`, amount: k }));
          if (results.has(k)) {
            replays += 1;
            assert.equal(r, results.get(k));
          } else {
            results.set(k, r);
          }
          break;
        } catch (error) {
          // A twin is refused as in progress (under Middy too, not as a failed delete).
          if (error.message !== 'injected' && error.name !== 'IdempotencyAlreadyInProgressError') throw error;
        }
      }
    }
  }));
  const { rows: [c] } = await pool.query(
    'SELECT count(*)::int AS effects, count(DISTINCT key)::int AS keys FROM node_test.effects WHERE scope = $1', [scope]);
  console.log(`powertools storm: ${label}, invocations ${invocations}, effects ${c.effects}, duplicates ${c.effects - c.keys}, byte-identical replays ${replays}/200`);
  assert.equal(replays, 200);
  // The handlers' { paymentId, amount }: an order jsonb would change ("amount" sorts first there).
  for (const text of results.values()) assert.match(text, /^\{"paymentId":\d+,"amount":\d+\}$/);
  assert.equal(c.keys, 100);
  assert.equal(c.effects, 100);
}

module.exports = { storm };
