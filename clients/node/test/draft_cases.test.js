// The IETF draft's cases from the shared table
// clients/conformance/draft-cases.json, on Express 5 and Express 4: the
// middleware with its defaults (plus the table's replay_headers) on POST and
// PATCH, one handler for every route (test/draft_runner.js).
'use strict';
const test = require('node:test');
const { idempotency } = require('..');
const { EXPRESS_VERSIONS, makePool, listen } = require('./helpers');
const { loadTable, answerOf, runCase } = require('./draft_runner');

const pool = makePool(10);
test.after(() => pool.end());
const table = loadTable();

async function countEffects(run) {
  const { rows } = await pool.query("SELECT count(*)::int AS n FROM node_test.effects WHERE strpos(key, $1) > 0", [run]);
  return rows[0].n;
}

function draftApp(express) {
  const app = express();
  const middleware = idempotency({ pool, replayHeaders: table.middleware.replay_headers });
  app.use((req, res, next) => (req.method === 'POST' || req.method === 'PATCH' ? middleware(req, res, next) : next()));
  app.use(async (req, res, next) => {
    try {
      await req.idem.client.query('INSERT INTO node_test.effects (scope, key) VALUES ($1, $2)', [req.idem.scope, req.idem.key]);
      const answer = answerOf(req.get('x-test-answer'));
      if (answer.throw) throw new Error('the handler failed, as the case asks');
      res.statusCode = answer.status;
      for (const [name, value] of answer.headers) res.appendHeader(name, value);
      if (answer.body === null) res.end(); else res.end(answer.body);
    } catch (error) {
      next(error); // Express 4 does not catch an async handler's rejection
    }
  });
  return app;
}

for (const { name, express } of EXPRESS_VERSIONS) test.describe(`draft cases: ${name}`, () => {
  let server;
  test.before(async () => { server = await listen(draftApp(express)); });
  test.after(() => server.close());
  for (const c of table.cases) {
    test(c.name, () => runCase(server.base, table, c, countEffects));
  }
});
