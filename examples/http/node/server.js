// POST /orders with an Idempotency-Key: the idem HTTP mapping in Node, with
// the package @idem/postgres (clients/node), which does the claim, the 409s
// and 422s, the replays and the outcome; this file is the shop's own part.
// ../python/server.py does the same steps by hand (docs/clients.md walks
// through them). Environment: DATABASE_URL, PORT (0: any free port,
// printed), WORK_MS.
'use strict';
const express = require('express');
const { Pool } = require('pg');
const { idempotency } = require('@idem/postgres');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const WORK_MS = Number(process.env.WORK_MS || 0);

const app = express();
// The effect in the request's transaction (req.idem.client): it commits with
// the outcome the middleware records, or not at all.
app.post('/orders', idempotency({ pool, scope: 'orders' }), async (req, res, next) => {
  try {
    const db = req.idem.client;
    if (WORK_MS) await db.query('SELECT pg_sleep($1)', [WORK_MS / 1000]);
    const { rows: [order] } = await db.query(
      `INSERT INTO shop.orders (idempotency_key, item, quantity, served_by)
       VALUES ($1, $2, $3, 'node') RETURNING id, item, quantity`,
      [req.idem.key, req.body.item, req.body.quantity]);
    res.status(201).json({ order_id: Number(order.id), item: order.item, quantity: order.quantity });
  } catch (error) {
    next(error);
  }
});

// PORT=0 takes any free port; the line says which one.
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () =>
  console.log(`listening on port ${server.address().port}`));
