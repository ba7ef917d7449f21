// Shared by the tests: a pool on the test server (IDEM_TEST_URL, the
// application's role), an Express app on a free port, effect counts, gates
// and polling with a deadline (never a fixed sleep).
'use strict';
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { spawn } = require('node:child_process');
const { Pool } = require('pg');

const url = process.env.IDEM_TEST_URL;
if (!url) throw new Error('IDEM_TEST_URL: a connection string for the tests\' role (test/setup.sql)');

// Express 5 and Express 4 (the npm alias express4): the middleware's tests run on both.
const EXPRESS_VERSIONS = [
  { name: 'express 5', express: require('express'), module: 'express' },
  { name: 'express 4', express: require('express4'), module: 'express4' },
];

function makePool(max = 10, extra = {}) {
  const pool = new Pool({ connectionString: url, ...(max === null ? {} : { max }), ...extra });
  pool.on('error', () => {}); // a backend ended under an idle client: the pool drops it
  return pool;
}

// A scope of its own per test, so tests never see each other's keys.
function scopeFor(name) {
  return `${name}-${randomUUID().slice(0, 8)}`;
}

function listen(app) {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve({
        base: `http://127.0.0.1:${server.address().port}`,
        close: () => new Promise((done) => { server.closeAllConnections(); server.close(done); }),
      });
    });
  });
}

async function post(base, path, { key, body, headers = {} } = {}) {
  const response = await fetch(base + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(key === undefined ? {} : { 'Idempotency-Key': key }), ...headers },
    body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, bytes, text: bytes.toString('utf8') };
}

async function effects(pool, scope, key = null) {
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n FROM node_test.effects WHERE scope = $1 AND ($2::text IS NULL OR key = $2)`,
    [scope, key]);
  return rows[0].n;
}

function gate() {
  let open;
  const promise = new Promise((resolve) => { open = resolve; });
  return { promise, open };
}

// Polls check() until it answers something truthy, for at most deadlineMs.
async function until(check, what, deadlineMs = 60000) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const answer = await check();
    if (answer) return answer;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Starts a test server in a child process (a fixture printing "listening on
// port N"): { base, child, exited, lines } where lines(re) waits for a line
// of its output matching re.
async function spawnServer(file, env) {
  const child = spawn(process.execPath, [file], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let out = '';
  const waiters = [];
  child.stdout.on('data', (chunk) => {
    out += chunk;
    for (const w of waiters) { const m = w.re.exec(out); if (m) w.resolve(m); }
  });
  const lines = (re) => new Promise((resolve, reject) => {
    const m = re.exec(out);
    if (m) return resolve(m);
    waiters.push({ re, resolve });
    exited.then(() => reject(new Error(`the server exited before printing ${re}`)));
  });
  const port = Number((await lines(/listening on port (\d+)/))[1]);
  return { base: `http://127.0.0.1:${port}`, child, exited, lines };
}

// A dead process's server sessions end a moment after it: waits until no
// session of that application_name is left, so what follows sees them gone.
async function sessionsGone(pool, applicationName) {
  await until(async () => {
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
    return rows[0].n === 0;
  }, `the sessions of ${applicationName} to end`);
}

async function hasAdapterCalls(pool) {
  const { rows } = await pool.query(
    "SELECT to_regprocedure('idem.release(text,text,bigint)') IS NOT NULL AS yes");
  return rows[0].yes;
}

// A storm's clients: `keys` keys (key-0, key-1, ...) sent `duplicates` times
// each, shuffled, by `clients` concurrent clients to POST base+path. A
// client resends on 409 and 5xx, as the draft asks, and every other answer
// must be 201. Answers map each key to record(answer) of every answer it got.
async function driveStorm({ base, path, keys, duplicates, clients, body, record, deadlineMs = 300000 }) {
  const work = [];
  for (let k = 0; k < keys; k += 1) for (let d = 0; d < duplicates; d += 1) work.push(k);
  for (let i = work.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [work[i], work[j]] = [work[j], work[i]];
  }
  const answers = new Map();
  const tally = { requests: 0, resent: 0, replays: 0, answers };
  const deadline = Date.now() + deadlineMs;
  async function client() {
    while (work.length > 0) {
      const n = work.pop();
      const key = `key-${n}`;
      for (;;) {
        assert.ok(Date.now() < deadline, 'the storm took longer than its deadline');
        tally.requests += 1;
        const answer = await post(base, path, { key, body: body(key, n) });
        if (answer.status === 409 || answer.status >= 500) { tally.resent += 1; continue; }
        assert.equal(answer.status, 201, answer.text);
        if (answer.headers.get('idempotent-replayed') === 'true') tally.replays += 1;
        if (!answers.has(key)) answers.set(key, []);
        answers.get(key).push(record(answer));
        break;
      }
    }
  }
  await Promise.all(Array.from({ length: clients }, client));
  return tally;
}

module.exports = {
  url, EXPRESS_VERSIONS, makePool, scopeFor, listen, post, effects, gate, until, spawnServer, sessionsGone, hasAdapterCalls,
  driveStorm,
};
