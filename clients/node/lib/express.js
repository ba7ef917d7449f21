// An Express middleware for the IETF draft "The Idempotency-Key HTTP Header
// Field" on idem: the key header, the body's fingerprint (RFC 8785 +
// SHA-256, as idem.request_hash), 400/409/422 as problem details, the stored
// answer replayed byte for byte with Idempotent-Replayed: true, and the
// handler's writes committed with the outcome when it uses req.idem.client.
'use strict';
const { createHash } = require('node:crypto');
const { requestHash, FingerprintError } = require('./jcs');
const store = require('./store');
const { STATUS_OF_SQLSTATE, problem } = require('./problem');

// An empty body's fingerprint: SHA-256 of no bytes, idem.request_hash(''::bytea).
const EMPTY_BODY_HASH = createHash('sha256').digest('hex');

// The draft's header is a Structured Field string ("..."); a bare token, as
// most clients send, is taken as it is. Only spaces and tabs (HTTP's OWS)
// are trimmed, so every package reads a value alike:
// clients/conformance/idempotency-key.json is the shared table of cases.
function parseKey(header) {
  if (header === undefined) return undefined;
  const quoted = /^[ \t]*"((?:[^"\\]|\\["\\])*)"[ \t]*$/.exec(header);
  return quoted ? quoted[1].replace(/\\(["\\])/g, '$1') : header.replace(/^[ \t]+|[ \t]+$/g, '');
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// The raw body: what a body parser left (express.text or express.raw), or
// read here. A body already parsed to an object has lost its numbers'
// spelling, so the middleware refuses to guess: mount it before express.json.
async function rawBody(req) {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === 'string') return Buffer.from(req.body, 'utf8');
  if (req._body || (req.body !== undefined && !req.readable)) {
    throw new Error('idem: the body was parsed before the idempotency middleware; mount it before express.json() or use express.raw()/express.text()');
  }
  return readBody(req);
}

function send(res, status, bodyText, headers) {
  res.status(status);
  res.set(headers);
  res.removeHeader('ETag');
  const bytes = Buffer.from(bodyText ?? '', 'utf8');
  res.set('Content-Length', String(bytes.length));
  res.end(bytes);
}

function sendProblem(res, status, detail, headers = {}, extra = {}) {
  send(res, status, problem(status, detail, extra), { 'Content-Type': 'application/problem+json', ...headers });
}

/**
 * idempotency({ pool, scope, ... }) -> Express middleware.
 *   pool         node-postgres Pool (required)
 *   scope        idem scope, e.g. the route's name (required)
 *   required     answer 400 when the header is missing (default true; false: pass through)
 *   header       the header's name (default 'Idempotency-Key')
 *   lockTimeout  seconds or interval text an owner keeps the key (default: idem.lock_timeout)
 *   retention    how long a key is remembered (default: idem.retention)
 *   wait         claim_or_wait's max_wait: wait for a running twin instead of a 409
 *   onError      'release' (default: a corrected request may reuse the key) or
 *                'fail' (mark_failed retryable: only the same body may retry)
 *   claimedBy    recorded with the claim (default: null)
 */
function idempotency(options) {
  const {
    pool, scope, required = true, header = 'Idempotency-Key', lockTimeout = null, retention = null,
    wait = null, onError = 'release', claimedBy = null,
  } = options || {};
  if (!pool || !scope) throw new TypeError('idempotency(): pool and scope are required');
  if (onError !== 'release' && onError !== 'fail') throw new TypeError("idempotency(): onError is 'release' or 'fail'");
  store.interval(lockTimeout); store.interval(retention); store.interval(wait); // refuse bad values now

  return async function idempotencyKeyMiddleware(req, res, next) {
    const key = parseKey(req.get(header));
    if (key === undefined) {
      if (!required) return next();
      return sendProblem(res, 400, `the ${header} is required`, {}, { sqlstate: 'P4001' });
    }
    let hash;
    let raw;
    try {
      raw = await rawBody(req);
      hash = raw.length === 0 ? EMPTY_BODY_HASH : requestHash(raw);
      req.rawBody = raw;
      req.body = raw.length === 0 ? undefined : JSON.parse(raw.toString('utf8'));
    } catch (error) {
      if (error instanceof FingerprintError) return sendProblem(res, 400, error.message, {}, { sqlstate: error.code });
      return next(error);
    }
    let claim;
    try {
      claim = await store.claim(pool, { scope, key, hash, claimedBy, lockTimeout, retention, wait });
    } catch (error) {
      return answerError(res, next, error);
    }
    if (store.REPLAYED.has(claim.kind)) {
      const headers = { 'Content-Type': 'application/json', 'Idempotent-Replayed': 'true' };
      if (claim.response_code === null) {
        return sendProblem(res, 500, `the request under this key failed: ${claim.failure_code}`, { 'Idempotent-Replayed': 'true' });
      }
      return send(res, claim.response_code, claim.stored, headers);
    }
    if (claim.kind === 'processing_active') {
      return sendProblem(res, 409, 'a request with this key is in progress',
        { 'Retry-After': String(claim.retry_after) });
    }
    await own(req, res, next, { scope, key, fence: claim.fence, kind: claim.kind, recoveryPoint: claim.recovery_point }, pool, onError);
  };
}

function answerError(res, next, error) {
  const status = STATUS_OF_SQLSTATE[error.code];
  if (status === undefined) return next(error);
  const detail = error.code === 'P4002' ? 'this key was used for a different request'
    : error.code === 'P4012' ? 'a retry took this key over' : error.message;
  const extra = { sqlstate: error.code };
  // Whether the other request still runs or has finished (idem 1.2).
  if (error.code === 'P4002' && store.storedStatus(error)) extra.stored_status = store.storedStatus(error);
  return sendProblem(res, status, detail, {}, extra);
}

// The request owns the key: a transaction is open on req.idem.client for the
// handler's writes; the answer it sends is held back, recorded in that
// transaction, committed, and then sent as idem stored it.
async function own(req, res, next, owned, pool, onError) {
  let client;
  try {
    client = await pool.connect();
    await client.query('BEGIN');
  } catch (error) {
    if (client) client.release(error);
    // No transaction for the handler: give the key back rather than leave
    // it locked until its lock runs out.
    await store.release(pool, owned).catch(() => {});
    return next(error);
  }
  const { scope, key, fence } = owned;
  req.idem = {
    ...owned,
    client,
    // Brandur's atomic phases: a phase's writes and its checkpoint commit together.
    setRecoveryPoint: (point) => client.query('SELECT idem.set_recovery_point($1, $2, $3, $4)', [scope, key, fence, point]),
  };
  const end = res.end.bind(res);
  const write = res.write;
  const chunks = [];
  let settled = false;
  res.write = function holdWrite(chunk, encoding, callback) {
    if (typeof encoding === 'function') { callback = encoding; encoding = undefined; }
    if (chunk) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, encoding || 'utf8'));
    if (callback) process.nextTick(callback);
    return true;
  };
  res.end = function holdEnd(chunk, encoding, callback) {
    if (typeof chunk === 'function') { callback = chunk; chunk = undefined; }
    if (typeof encoding === 'function') { callback = encoding; encoding = undefined; }
    if (chunk) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, encoding || 'utf8'));
    if (settled) return res;
    settled = true;
    res.write = write;
    res.end = end;
    settle(Buffer.concat(chunks)).then(callback, (error) => {
      console.error('idem: recording the outcome failed:', error);
      if (!res.headersSent) sendProblem(res, 500, 'the outcome could not be recorded');
    });
    return res;
  };

  async function settle(body) {
    const status = res.statusCode;
    let broken = null;
    try {
      if (status >= 500) {
        await client.query('ROLLBACK');
        await giveUp(`http_${status}`);
        return end(body);
      }
      let text = null;
      if (body.length > 0) {
        text = body.toString('utf8');
        try { JSON.parse(text); } catch {
          await client.query('ROLLBACK');
          await giveUp('not_json');
          return sendProblem(res, 500, 'the answer is not JSON, so it cannot be stored for replays');
        }
      }
      let stored;
      try {
        stored = status < 400 ? await store.succeed(client, owned, status, text)
          : await store.failFinal(client, owned, status, text);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        if (error.code === 'P4012' || error.code === 'P4010' || error.code === 'P4011') {
          // Another request took the key over: this one's writes are undone with its outcome.
          return sendProblem(res, 409, 'a retry took this key over; this attempt was rolled back', {}, { sqlstate: error.code });
        }
        throw error;
      }
      return send(res, stored.response_code, stored.stored, { 'Content-Type': 'application/json' });
    } catch (error) {
      broken = error;
      throw error;
    } finally {
      client.release(broken || undefined);
    }
  }

  // After a failed attempt: forget the key (a corrected request may use it)
  // or leave it to a retry of the same request. Another owner's key is left alone.
  async function giveUp(failureCode) {
    try {
      if (onError === 'release') await store.release(pool, owned);
      else await store.failRetryable(pool, owned, failureCode, null);
    } catch (error) {
      if (!['P4012', 'P4010', 'P4011', 'P4015'].includes(error.code)) throw error;
    }
  }

  next();
}

module.exports = { idempotency, parseKey };
