// The IETF draft's cases from the shared table
// clients/conformance/draft-cases.json, on the Fastify plugin: its defaults
// (plus the table's replay_headers, POST and PATCH), one handler for every
// route (test/draft_runner.js runs the cases).
'use strict';
const test = require('node:test');
const Fastify = require('fastify');
const idempotency = require('../lib/fastify');
const { makePool } = require('./helpers');
const { listenFastify } = require('./fastify_helpers');
const { loadTable, answerOf, runCase } = require('./draft_runner');

const pool = makePool(10);
const table = loadTable();
let server;

async function countEffects(run) {
  const { rows } = await pool.query("SELECT count(*)::int AS n FROM node_test.effects WHERE strpos(key, $1) > 0", [run]);
  return rows[0].n;
}

test.before(async () => {
  const app = Fastify();
  // An application that takes binary bodies has a parser for them; the plugin fingerprints the bytes either way.
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (request, body, done) => done(null, body));
  app.register(idempotency, { pool, replayHeaders: table.middleware.replay_headers });
  const handler = async (request, reply) => {
    await request.idem.client.query('INSERT INTO node_test.effects (scope, key) VALUES ($1, $2)',
      [request.idem.scope, request.idem.key]);
    const answer = answerOf(request.headers['x-test-answer']);
    if (answer.throw) throw new Error('the handler failed, as the case asks');
    reply.code(answer.status);
    // One call per name with all its values (in the order names first appear): one line per value.
    const byName = new Map();
    for (const [name, value] of answer.headers) byName.set(name, [...(byName.get(name) || []), value]);
    for (const [name, values] of byName) reply.header(name, values.length === 1 ? values[0] : values);
    return reply.send(answer.body === null ? undefined : answer.body);
  };
  app.post('/*', handler);
  app.patch('/*', handler);
  server = await listenFastify(app);
});
test.after(async () => { if (server) await server.close(); await pool.end(); });

for (const c of table.cases) {
  test(`draft cases: fastify: ${c.name}`, () => runCase(server.base, table, c, countEffects));
}
