// The Express application the cross-language test (test_cross_language.py)
// runs from a copy of the Node package (@idem/postgres): the middleware with
// its defaults (scope '<METHOD> <path>') and replayHeaders x-order-id, on the
// Python tests' database (DATABASE_URL, as role idem_py_app), and the draft
// table's handler: one effect row, then exactly the answer x-test-answer asks.
'use strict';
const express = require('express');
const { Pool } = require('pg');
const { idempotency } = require('.');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
const app = express();
const middleware = idempotency({ pool, replayHeaders: ['x-order-id'] });
app.use((req, res, next) => (req.method === 'POST' || req.method === 'PATCH' ? middleware(req, res, next) : next()));
app.use(async (req, res, next) => {
  try {
    await req.idem.client.query(
      "INSERT INTO shop.effects (scope, idempotency_key, amount, served_by) VALUES ($1, $2, 0, 'node')",
      [req.idem.scope, req.idem.key]);
    const answer = JSON.parse(req.get('x-test-answer'));
    res.statusCode = answer.status;
    for (const [name, value] of answer.headers) res.appendHeader(name, value);
    if (answer.body_base64 !== undefined) res.end(Buffer.from(answer.body_base64, 'base64'));
    else if (answer.body !== undefined) res.end(Buffer.from(answer.body, 'utf8'));
    else res.end();
  } catch (error) {
    next(error);
  }
});
const server = app.listen(0, '127.0.0.1', () => console.log(`listening on port ${server.address().port}`));
