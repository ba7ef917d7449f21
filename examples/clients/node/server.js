// POST /orders with an Idempotency-Key: the idem HTTP mapping in Node
// (node-postgres, Express). The same steps as ../python/server.py, which
// docs/clients.md walks through. Environment: DATABASE_URL, PORT (0: any free port, printed),
// WORK_MS.
'use strict';
const express = require('express');
const { Pool } = require('pg');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const SCOPE = 'orders';
const WORK_MS = Number(process.env.WORK_MS || 0);

// Hash the raw body in the claim statement: $3::jsonb (uncast it is 42725).
const CLAIM = `
SELECT c.kind::text AS kind, c.fence, c.response_code, c.response_body::text AS stored,
       idem.retry_after($1, c) AS retry_after
  FROM idem.claim_idempotency_key($1, $2, idem.request_hash($3::jsonb)) c`;

// The effect and its outcome in one transaction; the answer is the stored text.
const TAKE_ORDER = `
WITH o AS (
  INSERT INTO shop.orders (idempotency_key, item, quantity, served_by)
  VALUES ($2, $4::jsonb ->> 'item', ($4::jsonb ->> 'quantity')::int, 'node')
  RETURNING id, item, quantity)
SELECT a.response_code, a.response_body::text AS stored
  FROM o, idem.mark_succeeded_returning($1, $2, $3, 201,
         jsonb_build_object('order_id', o.id, 'item', o.item, 'quantity', o.quantity)) a`;

// SQLSTATE -> HTTP status (README, "Mapping to HTTP").
const STATUS_OF_SQLSTATE = {
  P4000: 400, P4001: 400, P4003: 400, P4005: 400, '22P02': 400,
  P4002: 422, P4012: 409,
};

function answer(res, status, body, headers = {}) {
  res.status(status).set({ 'Content-Type': 'application/json', ...headers }).send(Buffer.from(body, 'utf8'));
}

const app = express();
// The raw body as text, whatever its content type: idem hashes exactly it.
app.use(express.text({ type: () => true }));

app.post('/orders', async (req, res) => {
  const key = req.get('Idempotency-Key') ?? null; // null: idem answers P4001
  const raw = typeof req.body === 'string' ? req.body : '';
  try {
    const claim = (await pool.query(CLAIM, [SCOPE, key, raw])).rows[0];
    if (claim.kind === 'replay_success' || claim.kind === 'final_failure') {
      return answer(res, claim.response_code, claim.stored, { 'Idempotent-Replayed': 'true' });
    }
    if (claim.kind === 'processing_active') {
      return answer(res, 409, '{"error": "a request with this key is in progress"}',
        { 'Retry-After': String(claim.retry_after) });
    }
    // new_claim, processing_stale, retryable_failure: do the work.
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      if (WORK_MS) await client.query('SELECT pg_sleep($1)', [WORK_MS / 1000]);
      const done = (await client.query(TAKE_ORDER, [SCOPE, key, claim.fence, raw])).rows[0];
      await client.query('COMMIT');
      return answer(res, done.response_code, done.stored);
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  } catch (error) {
    const status = STATUS_OF_SQLSTATE[error.code];
    if (status === undefined) {
      return answer(res, 500, JSON.stringify({ error: 'internal error' }));
    }
    return answer(res, status, JSON.stringify({ error: error.message, sqlstate: error.code }));
  }
});

// PORT=0 takes any free port; the line says which one.
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () =>
  console.log(`listening on port ${server.address().port}`));
