// The stored answer ("envelope") every idem client package writes into
// idem's response_body, so an answer stored by one package replays byte for
// byte through any other:
//   {"idem_http": 1, "headers": [["content-type", "text/plain"], ...], "body": "created 17"}
// body is the exact bytes as a JSON string when they are valid UTF-8 without
// U+0000 (jsonb cannot hold it); otherwise body_base64. headers are the
// allow-listed ones, lower-cased, in the order the handler set them, one pair
// per value. A response_body in any other shape was stored by an earlier
// version or by SQL code, and replays as JSON text.
'use strict';
const { isUtf8 } = require('node:buffer');

const VERSION = 1;

// Headers a replay needs to mean what the first answer meant.
const DEFAULT_REPLAY_HEADERS = ['content-type', 'content-location', 'location', 'etag', 'last-modified', 'cache-control'];

// A replay computes its own length; the rest are about the connection, not the answer.
const NEVER_STORED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'idempotent-replayed']);

class NewerEnvelopeError extends Error {
  constructor(version) {
    super(`the stored answer was stored by a newer version of the package (idem_http ${JSON.stringify(version)})`);
    this.name = 'NewerEnvelopeError';
  }
}

// The allow-list: the defaults plus the application's names, any case.
function allowList(extra = []) {
  if (!Array.isArray(extra)) throw new TypeError('replayHeaders is a list of header names');
  const names = new Set(DEFAULT_REPLAY_HEADERS);
  for (const name of extra) {
    if (typeof name !== 'string' || name === '') throw new TypeError('replayHeaders is a list of header names');
    names.add(name.toLowerCase());
  }
  for (const name of NEVER_STORED) names.delete(name);
  return names;
}

// [name, value] pairs from a header list in any of the shapes frameworks
// keep: [[name, value]], or an object whose values are strings, numbers or
// arrays (Node's res.getHeaders()); only allowed names, lower-cased.
function pickHeaders(headers, allowed) {
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers || {});
  const picked = [];
  for (const [name, value] of pairs) {
    const lower = String(name).toLowerCase();
    if (!allowed.has(lower) || value === undefined || value === null) continue;
    for (const one of Array.isArray(value) ? value : [value]) picked.push([lower, String(one)]);
  }
  return picked;
}

// The envelope as JSON text, for mark_succeeded/mark_failed's jsonb argument.
function encode(headers, body) {
  const bytes = body === undefined || body === null ? Buffer.alloc(0) : Buffer.from(body);
  const envelope = { idem_http: VERSION, headers };
  if (isUtf8(bytes) && !bytes.includes(0)) envelope.body = bytes.toString('utf8');
  else envelope.body_base64 = bytes.toString('base64');
  return JSON.stringify(envelope);
}

class BadEnvelopeError extends Error {
  constructor(why) {
    super(`the stored answer is not well formed: ${why}`);
    this.name = 'BadEnvelopeError';
  }
}

const isPair = (h) => Array.isArray(h) && h.length === 2 && h.every((x) => typeof x === 'string');

// What a replay sends, from response_body::text (null when none was stored):
// { headers: [[name, value]], body: Buffer }. Throws NewerEnvelopeError for a
// version this package does not know, BadEnvelopeError for a malformed one.
function decode(storedText) {
  if (storedText === null || storedText === undefined) return { headers: [], body: Buffer.alloc(0) };
  const value = JSON.parse(storedText);
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !('idem_http' in value)) {
    // Legacy: the JSON document idem keeps, as its text.
    return { headers: [['content-type', 'application/json']], body: Buffer.from(storedText, 'utf8') };
  }
  if (value.idem_http !== VERSION) throw new NewerEnvelopeError(value.idem_http);
  const headers = value.headers === undefined ? [] : value.headers;
  if (!Array.isArray(headers) || !headers.every(isPair)) throw new BadEnvelopeError('headers are not [name, value] pairs');
  if (('body' in value) === ('body_base64' in value)) throw new BadEnvelopeError('not exactly one of body and body_base64');
  if ('body' in value) {
    if (typeof value.body !== 'string') throw new BadEnvelopeError('body is not a string');
    return { headers, body: Buffer.from(value.body, 'utf8') };
  }
  if (typeof value.body_base64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value.body_base64) || value.body_base64.length % 4 !== 0) {
    throw new BadEnvelopeError('body_base64 is not base64');
  }
  return { headers, body: Buffer.from(value.body_base64, 'base64') };
}

module.exports = { VERSION, DEFAULT_REPLAY_HEADERS, NewerEnvelopeError, BadEnvelopeError, allowList, pickHeaders, encode, decode };
