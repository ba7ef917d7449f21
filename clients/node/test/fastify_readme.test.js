// The package README's Fastify example, run as written: taken from the
// README's "## Fastify" section, started with the tests' database in PG*
// variables, and asked for an order twice with one key and once without.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { url, makePool, post } = require('./helpers');

test("the README's Fastify example works as written", async () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const code = /```js\n([\s\S]*?)```/.exec(readme.split('\n## Fastify\n')[1])[1];
  // Inside the package, so require('@idem/postgres/fastify') resolves to it (self-reference by "exports").
  const dir = fs.mkdtempSync(path.join(__dirname, '..', '.readme-'));
  const file = path.join(dir, 'fastify-example.js');
  fs.writeFileSync(file, code);
  const u = new URL(url);
  const child = spawn(process.execPath, ['-r', path.join(__dirname, 'fixtures', 'report-port.js'), file], {
    env: {
      ...process.env, PORT: '0', PGHOST: u.hostname, PGPORT: u.port, PGUSER: decodeURIComponent(u.username),
      PGDATABASE: u.pathname.slice(1), PGOPTIONS: '-c search_path=node_test',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pool = makePool(1);
  try {
    const port = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
        const m = /listening on port (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.on('exit', (status) => reject(new Error(`the example exited (${status})`)));
    });
    const base = `http://127.0.0.1:${port}`;
    const key = `fastify-readme-${process.pid}-${Date.now()}`;
    const first = await post(base, '/orders', { key, body: { item: key } });
    assert.equal(first.status, 201, first.text);
    assert.match(first.headers.get('location'), /^\/orders\/\d+$/);
    const again = await post(base, '/orders', { key, body: { item: key } });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.bytes, first.bytes);
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(again.headers.get('x-order-id'), first.headers.get('x-order-id'));
    assert.equal((await post(base, '/orders', { body: { item: key } })).status, 400);
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM node_test.orders WHERE item = $1', [key]);
    assert.equal(rows[0].n, 1);
  } finally {
    child.kill();
    await pool.end();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
