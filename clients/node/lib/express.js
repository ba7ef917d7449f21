// The Express (4 and 5) adapter of lib/http_core.js: reads the raw body,
// sends the core's answers, and holds the owner's answer back until its
// outcome is committed, then sends it as the handler made it.
'use strict';
const { createCore, parseKey } = require('./http_core');

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// The raw body: what a body parser left (express.text or express.raw), or
// read here. A body already parsed to an object has lost its bytes (and its
// numbers' spelling), so the middleware refuses to guess: mount it before
// express.json().
async function rawBody(req) {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === 'string') return Buffer.from(req.body, 'utf8');
  if (req._body || (req.body !== undefined && (!req.readable || req.readableEnded))) {
    throw new Error('idem: the body was parsed before the idempotency middleware; mount it before express.json() or use express.raw()/express.text()');
  }
  return readBody(req);
}

// Sends one of the core's answers. Headers earlier middleware set (CORS,
// say) stay, unless the answer has its own of that name; restore: the
// headers to go back to first (those set before the handler ran).
function send(res, { status, headers, body }, restore = null) {
  if (restore) {
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    for (const [name, value] of Object.entries(restore)) res.setHeader(name, value);
  }
  res.statusCode = status;
  const grouped = new Map();
  for (const [name, value] of headers) grouped.set(name, [...(grouped.get(name) || []), value]);
  for (const [name, values] of grouped) res.setHeader(name, values.length === 1 ? values[0] : values);
  res.end(body);
}

/**
 * idempotency({ pool, ... }) -> Express middleware.
 *   pool              node-postgres Pool (required)
 *   scope             replaces the default '<METHOD> <path>' (a string, or a function of req)
 *   principal         function of req: the account or tenant keys belong to (scope '<principal> ...')
 *   required          answer 400 when the header is missing (default true; false: pass through)
 *   header            the header's name (default 'Idempotency-Key')
 *   lockTimeout       seconds or interval text an owner keeps the key (default: idem.lock_timeout)
 *   retention         how long a key is remembered (default: idem.retention)
 *   wait              claim_or_wait's max_wait: wait for a running twin instead of a 409
 *   onError           'release' (default: a corrected request may reuse the key) or
 *                     'fail' (mark_failed retryable: only the same body may retry)
 *   claimedBy         recorded with the claim (default: null)
 *   replayHeaders     header names replayed besides the default allow-list
 *   bindLockToSession a crashed owner's key is free at once (default true; false behind
 *                     a transaction pooler)
 */
function idempotency(options) {
  const core = createCore(options);
  const { header } = core.options;

  return async function idempotencyKeyMiddleware(req, res, next) {
    let step;
    try {
      step = await core.start({
        method: req.method,
        url: req.originalUrl,
        keyHeader: req.get(header),
        contentType: req.get('content-type'),
        body: async () => { req.rawBody = await rawBody(req); return req.rawBody; },
        request: req,
      });
    } catch (error) {
      return next(error);
    }
    if (step.pass) return next();
    if (step.respond) return send(res, step.respond);
    own(req, res, next, step.owner);
  };
}

// The request owns the key: a transaction is open on req.idem.client for the
// handler's writes; the answer it makes is held back, recorded in that
// transaction, committed, and then sent as the handler made it.
function own(req, res, next, owner) {
  // JSON parsed here; another body as it came (a Buffer, or what express.text() left).
  if (owner.json !== undefined) req.body = owner.json;
  else if (req.body === undefined && req.rawBody.length > 0) req.body = req.rawBody;
  const { scope, key, fence, kind, recoveryPoint, client, setRecoveryPoint } = owner;
  req.idem = { scope, key, fence, kind, recoveryPoint, client, setRecoveryPoint };

  const { writeHead, write, end } = res;
  const before = res.getHeaders();
  const chunks = [];
  let settled = false;
  const add = (chunk, encoding) => {
    if (chunk !== undefined && chunk !== null && chunk.length !== 0) {
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8'));
    }
  };
  // writeHead would send the headers: keep its status and headers on res instead.
  res.writeHead = function holdWriteHead(status, reason, headers) {
    if (typeof reason !== 'string') { headers = reason; reason = undefined; }
    res.statusCode = status;
    if (reason !== undefined) res.statusMessage = reason;
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    }
    return res;
  };
  res.write = function holdWrite(chunk, encoding, callback) {
    if (typeof encoding === 'function') { callback = encoding; encoding = undefined; }
    add(chunk, encoding);
    if (callback) process.nextTick(callback);
    return true;
  };
  res.end = function holdEnd(chunk, encoding, callback) {
    if (typeof chunk === 'function') { callback = chunk; chunk = undefined; }
    if (typeof encoding === 'function') { callback = encoding; encoding = undefined; }
    add(chunk, encoding);
    if (settled) return res;
    settled = true;
    res.writeHead = writeHead;
    res.write = write;
    res.end = end;
    const body = Buffer.concat(chunks);
    owner.finish(res.statusCode, res.getHeaders(), body).then((outcome) => {
      if (outcome.respond) send(res, outcome.respond, before);
      else res.end(body, callback);
    }, (error) => {
      console.error('idem: settling the outcome failed:', error);
      if (!res.headersSent) send(res, { status: 500, headers: [], body: Buffer.alloc(0) }, before);
    });
    return res;
  };
  next();
}

module.exports = { idempotency, parseKey };
