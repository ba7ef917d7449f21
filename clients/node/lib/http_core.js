// The IETF draft "The Idempotency-Key HTTP Header Field" on idem, without a
// web framework: the key header, the request's fingerprint, the default
// scope, the claim on one dedicated connection, replays and problem answers,
// and the owner's transaction with its outcome. lib/express.js is a thin
// adapter over it; a Fastify plugin (or any other) uses it the same way.
//
// The interface an adapter uses:
//   const core = createCore(options)          options: see idempotency() in express.js
//   const step = await core.start({ method, url, keyHeader, contentType, body, request })
//     method, url   the request line's method and target as sent (url: path and
//                   query, with the mount prefix, e.g. Express's req.originalUrl)
//     keyHeader     the Idempotency-Key header's value, or undefined
//     body          a Buffer of the raw body (or a function returning a promise
//                   of one: read only when a key was sent)
//     request       the framework's request, given to the scope and principal options
//   step is exactly one of:
//     { pass: true }              no key, and the option required is false: run the handler as usual
//     { respond: answer }         send answer = { status, headers: [[name, value]], body: Buffer }
//                                 as it is (a replay, a 409, a problem); the handler does not run
//     { owner }                   this request owns the key; owner = { scope, key, fence, kind,
//                                 recoveryPoint, client, json, setRecoveryPoint(point),
//                                 finish(status, headers, body), abandon(error) }
//   The adapter runs the handler with owner.client (a transaction is open on it)
//   and holds its answer back; then
//     await owner.finish(status, headers, body)
//       headers: the answer's headers, [[name, value]] or Node's res.getHeaders()
//       resolves { asIs: true } (send the handler's answer unchanged: recorded, or
//       a 5xx whose key was given up) or { respond: answer } (a problem instead)
//     await owner.abandon(error)   the handler failed without an answer (a thrown
//                                  error the framework turns into its own 5xx later
//                                  may use finish() instead): rollback, give the key up
//   Either gives the connection back; call exactly one, once.
'use strict';
const { createHash } = require('node:crypto');
const { requestHash, FingerprintError } = require('./jcs');
const store = require('./store');
const answer = require('./answer');
const { STATUS_OF_SQLSTATE, problem } = require('./problem');

// The draft's header is a Structured Field string ("..."); a bare token, as
// most clients send, is taken as it is. Only spaces and tabs (HTTP's OWS)
// are trimmed, so every package reads a value alike:
// clients/conformance/idempotency-key.json is the shared table of cases.
function parseKey(header) {
  if (header === undefined || header === null) return undefined;
  const quoted = /^[ \t]*"((?:[^"\\]|\\["\\])*)"[ \t]*$/.exec(header);
  return quoted ? quoted[1].replace(/\\(["\\])/g, '$1') : header.replace(/^[ \t]+|[ \t]+$/g, '');
}

// application/json and any */*+json: fingerprinted canonically (RFC 8785),
// so another spelling of the same document is the same request.
function isJsonType(contentType) {
  if (!contentType) return false;
  const type = String(contentType).split(';')[0].trim().toLowerCase();
  return type === 'application/json' || /^[^/\s]+\/[^/\s]+\+json$/.test(type);
}

// The shared rule: a non-empty JSON body as idem.request_hash(jsonb), any
// other body (the empty one too) as idem.request_hash(bytea).
function fingerprint(contentType, body) {
  if (body.length > 0 && isJsonType(contentType)) return requestHash(body);
  return createHash('sha256').update(body).digest('hex');
}

// The request target's path as sent: percent-encoded, without the query.
function pathOf(url) {
  const cut = String(url).search(/[?#]/);
  return cut === -1 ? String(url) : String(url).slice(0, cut);
}

function problemAnswer(status, detail, headers = [], extra = {}) {
  return {
    status,
    headers: [['content-type', 'application/problem+json'], ...headers],
    body: Buffer.from(problem(status, detail, extra), 'utf8'),
  };
}

// A replay: the stored status and headers, marked, with its own length
// (none where HTTP allows no body).
function replayAnswer(status, stored) {
  const headers = [...stored.headers, ['idempotent-replayed', 'true']];
  if (status >= 200 && status !== 204 && status !== 304) headers.push(['content-length', String(stored.body.length)]);
  return { status, headers, body: stored.body };
}

function claimProblem(error) {
  const status = STATUS_OF_SQLSTATE[error.code];
  if (status === undefined) return null;
  const detail = error.code === 'P4002' ? 'this key was used for a different request'
    : error.code === 'P4012' ? 'a retry took this key over' : error.message;
  const extra = { sqlstate: error.code };
  // Whether the other request still runs or has finished (idem 1.2).
  if (error.code === 'P4002' && store.storedStatus(error)) extra.stored_status = store.storedStatus(error);
  return problemAnswer(status, detail, [], extra);
}

const FENCE_LOST = new Set(['P4012', 'P4010', 'P4011', 'P4015']);

function createCore(options) {
  const {
    pool, scope = null, principal = null, required = true, header = 'Idempotency-Key', lockTimeout = null,
    retention = null, wait = null, onError = 'release', claimedBy = null, replayHeaders = [],
    bindLockToSession = true, logger = console,
  } = options || {};
  if (!pool) throw new TypeError('idempotency(): pool is required');
  if (scope !== null && typeof scope !== 'string' && typeof scope !== 'function') throw new TypeError('idempotency(): scope is a string or a function of the request');
  if (principal !== null && typeof principal !== 'function') throw new TypeError('idempotency(): principal is a function of the request');
  if (onError !== 'release' && onError !== 'fail') throw new TypeError("idempotency(): onError is 'release' or 'fail'");
  store.interval(lockTimeout); store.interval(retention); store.interval(wait); // refuse bad values now
  const allowed = answer.allowList(replayHeaders);
  // Session binding, until this middleware learns it cannot prove the
  // claim's session is the request's (a transaction pooler between it and
  // the server) or the server cannot bind (55000).
  const binding = { on: bindLockToSession !== false };
  function stopBinding(why) {
    if (!binding.on) return;
    binding.on = false;
    logger.warn(`idem: not binding keys to sessions any more (${why}); a crashed request's key now waits for its lock to run out`);
  }

  async function scopeOf(method, url, request) {
    const target = typeof scope === 'function' ? await scope(request)
      : typeof scope === 'string' ? scope : `${String(method).toUpperCase()} ${pathOf(url)}`;
    const who = principal ? await principal(request) : null;
    return typeof who === 'string' && who !== '' ? `${who} ${target}` : target;
  }

  async function claimOn(client, args) {
    for (;;) {
      const bind = binding.on;
      try {
        return await store.claim(client, { ...args, bind });
      } catch (error) {
        // The server cannot bind (no preload, or the portable engine without
        // pg_read_all_stats): claim without it rather than refuse every request.
        if (!bind || error.code !== '55000') throw error;
        stopBinding(`the server refused: ${error.message}`);
      }
    }
  }

  async function start({ method, url, keyHeader, contentType, body, request }) {
    const key = parseKey(keyHeader);
    if (key === undefined) {
      if (!required) return { pass: true };
      return { respond: problemAnswer(400, `the ${header} is required`, [], { sqlstate: 'P4001' }) };
    }
    const raw = typeof body === 'function' ? await body() : body;
    let hash;
    try {
      hash = fingerprint(contentType, raw);
    } catch (error) {
      if (error instanceof FingerprintError) return { respond: problemAnswer(400, error.message, [], { sqlstate: error.code }) };
      throw error;
    }
    const json = raw.length > 0 && isJsonType(contentType) ? JSON.parse(raw.toString('utf8')) : undefined;
    const scopeName = await scopeOf(method, url, request);

    // One connection for the claim and, if this request owns the key, for
    // its transaction: a waiter never holds a connection its owner needs.
    const client = await pool.connect();
    let claim;
    try {
      claim = await claimOn(client, { scope: scopeName, key, hash, claimedBy, lockTimeout, retention, wait });
    } catch (error) {
      client.release(brokenConnection(error));
      const answered = claimProblem(error);
      if (answered) return { respond: answered };
      throw error;
    }
    if (!store.OWNED.has(claim.kind)) {
      client.release();
      return { respond: notOwnedAnswer(claim) };
    }
    try {
      await client.query('BEGIN');
    } catch (error) {
      client.release(error);
      // No transaction for the handler: give the key back rather than leave
      // it locked until its lock runs out.
      await store.release(pool, { scope: scopeName, key, fence: claim.fence }).catch(() => {});
      throw error;
    }
    return { owner: makeOwner(client, { scope: scopeName, key, claim, json }) };
  }

  function notOwnedAnswer(claim) {
    if (claim.kind === 'processing_active') {
      return problemAnswer(409, 'a request with this key is in progress', [['retry-after', String(claim.retry_after)]]);
    }
    if (claim.response_code === null) {
      return problemAnswer(500, `the request under this key failed: ${claim.failure_code}`, [['idempotent-replayed', 'true']]);
    }
    try {
      return replayAnswer(claim.response_code, answer.decode(claim.stored));
    } catch (error) {
      if (error instanceof answer.NewerEnvelopeError || error instanceof answer.BadEnvelopeError) return problemAnswer(500, error.message);
      throw error;
    }
  }

  function makeOwner(client, { scope: scopeName, key, claim, json }) {
    const owned = { scope: scopeName, key, fence: claim.fence };
    let done = false;
    function once() {
      if (done) throw new Error('idem: the outcome was already settled');
      done = true;
    }

    // After a failed attempt: forget the key (a corrected request may use it)
    // or leave it to a retry of the same request. Another owner's key is left
    // alone. On the request's own connection, after its rollback.
    async function giveUp(failureCode) {
      try {
        if (onError === 'release') await store.release(client, owned);
        else await store.failRetryable(client, owned, failureCode, null);
      } catch (error) {
        if (!FENCE_LOST.has(error.code)) throw error;
      }
    }

    async function rollBackAndGiveUp(failureCode) {
      let broken;
      try {
        await client.query('ROLLBACK');
        await giveUp(failureCode);
      } catch (error) {
        broken = error;
        throw error;
      } finally {
        client.release(broken);
      }
    }

    async function finish(status, headers, body) {
      once();
      const bytes = body === undefined || body === null ? Buffer.alloc(0) : Buffer.from(body);
      if (status >= 500) {
        await rollBackAndGiveUp(`http_${status}`);
        return { asIs: true };
      }
      const envelope = answer.encode(answer.pickHeaders(headers, allowed), bytes);
      let recorded;
      try {
        recorded = status < 400 ? await store.succeed(client, owned, status, envelope)
          : await store.failFinal(client, owned, status, envelope);
        await client.query('COMMIT');
      } catch (error) {
        if (FENCE_LOST.has(error.code)) {
          // Another request took the key over: this one's writes are undone with its outcome.
          await client.query('ROLLBACK').catch(() => {});
          client.release();
          return { respond: problemAnswer(409, 'a retry took this key over; this attempt was rolled back', [], { sqlstate: error.code }) };
        }
        logger.error('idem: recording the outcome failed:', error);
        await rollBackAndGiveUp('not_recorded').catch(() => {});
        return { respond: problemAnswer(500, 'the outcome could not be recorded') };
      }
      client.release();
      // A claim and its outcome on two server sessions: a pooler in between,
      // so a binding would tie the key to a session the pooler shares.
      if (binding.on && recorded.backend_pid !== claim.backend_pid) {
        stopBinding(`the claim ran on server process ${claim.backend_pid} and the outcome on ${recorded.backend_pid}: a transaction pooler? set bindLockToSession: false there`);
      }
      return { asIs: true };
    }

    async function abandon() {
      once();
      await rollBackAndGiveUp('handler_error');
    }

    return {
      ...owned,
      kind: claim.kind,
      recoveryPoint: claim.recovery_point,
      client,
      json,
      // Brandur's atomic phases: a phase's writes and its checkpoint commit together.
      setRecoveryPoint: (point) => client.query('SELECT idem.set_recovery_point($1, $2, $3, $4)', [scopeName, key, claim.fence, point]),
      finish,
      abandon,
    };
  }

  return { start, binding, options: { header, required } };
}

// A connection that failed at the protocol level is dropped, not reused.
function brokenConnection(error) {
  return error && error.code === undefined ? error : undefined;
}

module.exports = { createCore, parseKey, isJsonType, fingerprint, pathOf, problemAnswer };
