// The runner of clients/conformance/draft-cases.json (the IETF draft's cases
// as one table every idem HTTP middleware runs; its "_doc" says how): loads
// the table and runs one case's steps against a server, asserting each
// step's "expect". A framework's test file supplies the server: one handler
// for every route that writes one effect row tagged with req.idem.key and
// answers what the x-test-answer header says (answerOf gives it decoded).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');

// IDEM_DRAFT_CASES, or beside IDEM_KEY_VECTORS (node_package.sh sets it when it
// copies the package out of the tree), or in the tree.
function casesFile() {
  if (process.env.IDEM_DRAFT_CASES) return process.env.IDEM_DRAFT_CASES;
  if (process.env.IDEM_KEY_VECTORS) return path.join(path.dirname(process.env.IDEM_KEY_VECTORS), 'draft-cases.json');
  return path.join(__dirname, '..', '..', 'conformance', 'draft-cases.json');
}

function loadTable() {
  return JSON.parse(fs.readFileSync(casesFile(), 'utf8'));
}

// What the handler is to answer: { status, headers: [[name, value]], body: Buffer | null } or { throw: true }.
function answerOf(headerValue) {
  const a = JSON.parse(headerValue);
  if (a.throw) return { throw: true };
  const body = a.body_base64 !== undefined ? Buffer.from(a.body_base64, 'base64')
    : a.body !== undefined ? Buffer.from(a.body, 'utf8') : null;
  return { status: a.status, headers: a.headers || [], body };
}

function stepBody(step) {
  if (step.body_base64 !== undefined) return Buffer.from(step.body_base64, 'base64');
  if (step.body !== undefined) return Buffer.from(step.body, 'utf8');
  return undefined;
}

// Every line of a header, in order: fetch's Headers joins repeated ones, so
// the runner reads them from the raw answer with node:http.
function request(base, step, run) {
  const http = require('node:http');
  const url = new URL(step.path.replaceAll('{run}', run), base);
  const headers = {};
  for (const [n, v] of Object.entries(step.headers || {})) headers[n] = String(v).replaceAll('{run}', run);
  headers['x-test-answer'] = JSON.stringify(step.answer || { status: 500 });
  const body = stepBody(step);
  if (body) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: step.method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const lines = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push([res.rawHeaders[i].toLowerCase(), res.rawHeaders[i + 1]]);
        resolve({ status: res.statusCode, lines, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const valuesOf = (lines, name) => lines.filter(([n]) => n === name).map(([, v]) => v);

// Runs one case: countEffects(run) answers the effect rows whose key holds run.
async function runCase(base, table, c, countEffects) {
  const run = randomUUID().replaceAll('-', '');
  const allowed = new Set([...table.default_replay_headers, ...((table.middleware || {}).replay_headers || [])]);
  const answers = [];
  for (const [i, step] of c.steps.entries()) {
    const got = await request(base, step, run);
    answers.push(got);
    const e = step.expect || {};
    const where = `${c.name}, step ${i}`;
    if (e.status !== undefined) assert.equal(got.status, e.status, `${where}: status (${got.body.toString('utf8').slice(0, 200)})`);
    if (e.replayed === true) assert.deepEqual(valuesOf(got.lines, 'idempotent-replayed'), ['true'], `${where}: replayed`);
    if (e.replayed === false) assert.deepEqual(valuesOf(got.lines, 'idempotent-replayed'), [], `${where}: not replayed`);
    for (const [name, value] of Object.entries(e.headers || {})) {
      assert.deepEqual(valuesOf(got.lines, name), Array.isArray(value) ? value : [value], `${where}: header ${name}`);
    }
    for (const name of e.absent_headers || []) assert.deepEqual(valuesOf(got.lines, name), [], `${where}: no ${name}`);
    if (e.problem) {
      assert.match(valuesOf(got.lines, 'content-type')[0] || '', /^application\/problem\+json\s*(;|$)/, `${where}: problem type`);
      assert.equal(JSON.parse(got.body.toString('utf8')).status, got.status, `${where}: problem status`);
    }
    if (e.sqlstate !== undefined) assert.equal(JSON.parse(got.body.toString('utf8')).sqlstate, e.sqlstate, `${where}: sqlstate`);
    if (e.as_answered) {
      const a = answerOf(JSON.stringify(step.answer));
      assert.equal(got.status, a.status, `${where}: as answered, status`);
      for (const name of new Set(a.headers.map(([n]) => n.toLowerCase()))) {
        assert.deepEqual(valuesOf(got.lines, name), a.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v), `${where}: as answered, ${name}`);
      }
      assert.deepEqual(got.body, a.body || Buffer.alloc(0), `${where}: as answered, body`);
    }
    if (e.same_as_step !== undefined) {
      const a = answerOf(JSON.stringify(c.steps[e.same_as_step].answer));
      assert.equal(got.status, a.status, `${where}: as step ${e.same_as_step}, status`);
      assert.deepEqual(got.body, a.body || Buffer.alloc(0), `${where}: as step ${e.same_as_step}, body`);
      for (const name of new Set(a.headers.map(([n]) => n.toLowerCase()))) {
        const expected = allowed.has(name) ? a.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v) : [];
        assert.deepEqual(valuesOf(got.lines, name), expected, `${where}: as step ${e.same_as_step}, ${name}`);
      }
    }
    if (e.effects !== undefined) assert.equal(await countEffects(run), e.effects, `${where}: effects`);
  }
}

module.exports = { loadTable, answerOf, runCase, casesFile };
