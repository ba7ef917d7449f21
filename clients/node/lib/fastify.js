// A Fastify (5) plugin for the IETF draft "The Idempotency-Key HTTP Header
// Field" on idem, over the framework-neutral core (lib/http_core.js): the
// same key reading, fingerprint, default scope, claim on one connection,
// replays and problem answers as the Express middleware.
//
//   fastify.register(require('@idem/postgres/fastify'), { pool, ... });
//   fastify.post('/orders', async (request, reply) => { ... request.idem.client ... });
//
// Like fastify-plugin, it is not encapsulated: its hooks belong to the
// context it is registered in, so they cover the POST and PATCH routes of
// that context and of its children, whenever declared (Fastify adds a hook
// to every child context).
// A route's config.idempotency opts out (false), in (true, any method) or in
// with options of its own (an object). The hooks:
//   preParsing   keeps a copy of the body's bytes as the parser reads them
//   preHandler   claims; a replay, a 409 or a problem is answered here
//   onSend       the handler's answer (string, Buffer, stream, Response):
//                recorded and committed before it is sent, unchanged
//   onResponse   a reply that never passed onSend (hijacked): rolled back
'use strict';
const { Transform } = require('node:stream');
const { createCore } = require('./http_core');

const DEFAULT_METHODS = ['POST', 'PATCH'];
const kBody = Symbol('idem.body');
const kOwner = Symbol('idem.owner');
const kAnswered = Symbol('idem.answered');

// Passes the body through to the content-type parser and keeps its bytes: the
// parser's limits and errors stay Fastify's, and request.body its own.
class BodyCopy extends Transform {
  constructor() {
    super();
    this.chunks = [];
  }

  _transform(chunk, encoding, callback) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
    this.chunks.push(bytes);
    callback(null, bytes);
  }
}

// The body's bytes, once the parser read them; a body no parser read (no
// content-type, or a route that parses nothing) is read here.
function bodyOf(request) {
  const copy = request[kBody];
  if (!copy) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    if (copy.readableEnded) return resolve(Buffer.concat(copy.chunks));
    copy.once('end', () => resolve(Buffer.concat(copy.chunks)));
    copy.once('error', reject);
    copy.resume();
  });
}

// The handler's payload as bytes: what onSend may see.
async function bytesOf(payload) {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  if (typeof payload.pipe === 'function' || typeof payload.getReader === 'function' || Symbol.asyncIterator in payload) {
    const chunks = [];
    for await (const chunk of payload) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
    return Buffer.concat(chunks);
  }
  throw new TypeError(`idem: cannot store a reply payload of type ${typeof payload}`);
}

// A WHATWG Response sent as the reply: its status and headers become the
// reply's, as Fastify would apply them after onSend, so they are recorded.
function unwrapResponse(reply, payload) {
  if (payload === null || typeof payload !== 'object' || Object.prototype.toString.call(payload) !== '[object Response]') {
    return payload;
  }
  reply.code(payload.status);
  for (const [name, value] of payload.headers) reply.header(name, value);
  return payload.body;
}

// An answer the core made (a replay, a 409, a problem): its headers in
// order, a name set twice as two lines.
function send(reply, { status, headers, body }) {
  reply[kAnswered] = { contentType: headers.some(([name]) => name.toLowerCase() === 'content-type') };
  reply.code(status);
  const byName = new Map();
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    byName.set(lower, [...(byName.get(lower) || []), value]);
  }
  for (const [name, values] of byName) reply.header(name, values.length === 1 ? values[0] : values);
  return reply.send(body.length > 0 ? body : undefined);
}

/**
 * The plugin's options: those of the Express middleware (lib/express.js):
 *   pool (required), scope, principal, replayHeaders, required, header,
 *   lockTimeout, retention, wait, onError, claimedBy, bindLockToSession, logger
 * and methods: the methods covered without a route's config (default POST, PATCH).
 */
async function fastifyIdempotency(fastify, options) {
  const { methods = DEFAULT_METHODS, ...coreOptions } = options || {};
  const covered = new Set(methods.map((method) => String(method).toUpperCase()));
  const shared = createCore(coreOptions); // refuses bad options at registration
  const perRoute = new WeakMap(); // a route's config -> the core with its own options

  function coreFor(config) {
    let core = perRoute.get(config);
    if (!core) {
      core = createCore({ ...coreOptions, ...config.idempotency });
      perRoute.set(config, core);
    }
    return core;
  }

  // The core that handles this request, or null: not a route (404), not a
  // covered method, or a route that opted out.
  function coreOf(request) {
    if (request.is404) return null;
    const { config } = request.routeOptions;
    const setting = config ? config.idempotency : undefined;
    if (setting === false) return null;
    if (setting === undefined || setting === null) return covered.has(request.method) ? shared : null;
    if (setting === true) return shared;
    return coreFor(config);
  }

  if (!fastify.hasRequestDecorator('idem')) fastify.decorateRequest('idem', null);

  // A route declared from now on with options of its own: refused now if they are bad.
  fastify.addHook('onRoute', (routeOptions) => {
    const setting = routeOptions.config ? routeOptions.config.idempotency : undefined;
    if (setting !== null && typeof setting === 'object') createCore({ ...coreOptions, ...setting });
  });

  fastify.addHook('preParsing', (request, reply, payload, next) => {
    const core = coreOf(request);
    // Without a key the body is never fingerprinted: nothing to keep.
    if (!core || request.headers[core.options.header.toLowerCase()] === undefined) return next(null, payload);
    const copy = new BodyCopy();
    payload.on('error', (error) => copy.destroy(error));
    request[kBody] = copy;
    return next(null, payload.pipe(copy));
  });

  fastify.addHook('preHandler', async (request, reply) => {
    const core = coreOf(request);
    if (!core) return undefined;
    const step = await core.start({
      method: request.raw.method,
      url: request.raw.url,
      keyHeader: request.headers[core.options.header.toLowerCase()],
      contentType: request.headers['content-type'],
      body: () => bodyOf(request),
      request,
    });
    if (step.pass) return undefined;
    if (step.respond) return send(reply, step.respond);
    const { owner } = step;
    request[kOwner] = owner;
    request.idem = {
      client: owner.client,
      scope: owner.scope,
      key: owner.key,
      fence: owner.fence,
      kind: owner.kind,
      recoveryPoint: owner.recoveryPoint,
      setRecoveryPoint: owner.setRecoveryPoint,
    };
    return undefined;
  });

  fastify.addHook('onSend', async (request, reply, payload) => {
    if (reply[kAnswered]) {
      // Fastify gives a Buffer without a content-type one; a stored answer had none.
      if (!reply[kAnswered].contentType) reply.removeHeader('content-type');
      return payload;
    }
    const owner = request[kOwner];
    if (!owner) return payload;
    request[kOwner] = null;
    let bytes;
    try {
      bytes = await bytesOf(unwrapResponse(reply, payload));
    } catch (error) {
      await owner.abandon(error);
      throw error;
    }
    const outcome = await owner.finish(reply.statusCode, reply.getHeaders(), bytes);
    if (outcome.asIs) return bytes;
    // Not recorded (a retry took the key over, or the outcome failed): the
    // handler's answer is replaced by the problem, none of its headers kept.
    for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
    const { status, headers, body } = outcome.respond;
    reply.code(status);
    for (const [name, value] of headers) reply.header(name, value);
    return body;
  });

  fastify.addHook('onResponse', async (request) => {
    const owner = request[kOwner];
    if (!owner) return;
    request[kOwner] = null;
    await owner.abandon(new Error('the reply was sent without passing onSend'));
  });
}

// As fastify-plugin marks a plugin: its hooks and decorator belong to the
// context it is registered in, not to a context of its own.
fastifyIdempotency[Symbol.for('skip-override')] = true;
fastifyIdempotency[Symbol.for('fastify.display-name')] = '@idem/postgres';
fastifyIdempotency[Symbol.for('plugin-meta')] = { name: '@idem/postgres', fastify: '5.x' };

module.exports = fastifyIdempotency;
module.exports.default = fastifyIdempotency;
module.exports.fastifyIdempotency = fastifyIdempotency;
