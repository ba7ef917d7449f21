// A persistence layer for Powertools for AWS Lambda's idempotency utility
// (@aws-lambda-powertools/idempotency 2.x) over idem. Powertools asks the
// layer to put an in-progress record, then to save the result or delete the
// record when the handler threw; idem does each in one call, and its fence
// travels from the claim to the outcome with the invocation's own event
// object (a WeakMap entry that goes when the event does), never in a map
// keyed by the idempotency key, which two invocations can share. The entry
// also keeps the key and payload hash the claim was made with, so the outcome
// completes the record this invocation owns even if the handler changed its
// event, and a release is asked only of the invocation that claimed.
//
// A result is stored as its JSON text, in an envelope inside idem's
// response_body ({"idem_powertools": 1, "json": "<JSON.stringify(result)>"}):
// jsonb would reorder an object's keys, and a replay must stringify the same
// as the first answer. Anything else in response_body (what earlier versions
// stored: the result itself as jsonb) replays as it is.
'use strict';
const { createHash } = require('node:crypto');
const { BasePersistenceLayer, IdempotencyRecord } = require('@aws-lambda-powertools/idempotency/persistence');
const {
  IdempotencyItemAlreadyExistsError, IdempotencyRecordStatus, IdempotencyPersistenceLayerError,
} = require('@aws-lambda-powertools/idempotency');
const store = require('./store');

// Without payload validation Powertools' payload hash is empty; idem needs
// one, and one constant means "any payload" for that key.
const NO_PAYLOAD_HASH = createHash('sha256').update('powertools: no payload validation').digest('hex');
// A stored hash that never equals a Powertools one: P4002 reads as "another payload".
const OTHER_PAYLOAD = '\u0000another payload';
const ENVELOPE_VERSION = 1;

// The stored form of a handler's result: null (no result) or the envelope's text.
function storedResult(result) {
  const json = JSON.stringify(result);
  if (json === undefined) return null;
  return JSON.stringify({ idem_powertools: ENVELOPE_VERSION, json });
}

// The result a stored response_body (its text, or null) replays.
function replayedResult(stored) {
  if (stored === null || stored === undefined) return undefined;
  const value = JSON.parse(stored);
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, 'idem_powertools')) {
    if (value.idem_powertools !== ENVELOPE_VERSION || typeof value.json !== 'string') {
      throw new IdempotencyPersistenceLayerError(
        `the stored result was written by a newer version of @idem/postgres (idem_powertools ${JSON.stringify(value.idem_powertools)})`);
    }
    return JSON.parse(value.json);
  }
  return value; // stored by an earlier version: the result as jsonb
}

class IdemPersistenceLayer extends BasePersistenceLayer {
  #pool;
  #scope;
  #lockTimeout;
  #transactional;
  #claimedBy;
  #invocations = new WeakMap(); // the invocation's event object -> { key, payloadHash, fence, client, taken, finished, finish }

  /**
   * @param {object} options
   * @param {import('pg').Pool} options.pool
   * @param {string} [options.scope='powertools'] the idem scope of the keys
   * @param {number|string} [options.lockTimeout] how long a claim holds the key when the
   *   Lambda context gives no remaining time (default: idem.lock_timeout)
   * @param {boolean} [options.transactional=false] open a transaction per invocation;
   *   the handler writes through layer.client(event), and its writes commit with the result
   * @param {string} [options.claimedBy]
   */
  constructor({ pool, scope = 'powertools', lockTimeout = null, transactional = false, claimedBy = null } = {}) {
    super();
    if (!pool) throw new TypeError('IdemPersistenceLayer: pool is required');
    store.interval(lockTimeout);
    this.#pool = pool;
    this.#scope = scope;
    this.#lockTimeout = lockTimeout;
    this.#transactional = transactional;
    this.#claimedBy = claimedBy;
  }

  /** The transaction's client of the invocation whose event this is (transactional only). */
  client(event) {
    const invocation = this.#invocations.get(event);
    if (!invocation || !invocation.client) {
      throw new Error('IdemPersistenceLayer.client(event): no transaction for this event (transactional: true, inside the handler)');
    }
    return invocation.client;
  }

  async saveInProgress(data, remainingTimeInMillis) {
    const record = new IdempotencyRecord({
      idempotencyKey: this.getHashedIdempotencyKey(data),
      status: IdempotencyRecordStatus.INPROGRESS,
      expiryTimestamp: this.getExpiryTimestamp(),
      payloadHash: this.getHashedPayload(data),
    });
    // Powertools' in-progress expiry is the Lambda's remaining time: idem's lock.
    if (remainingTimeInMillis) record.inProgressExpiryTimestamp = Date.now() + remainingTimeInMillis;
    const cached = this.getFromCache(record.idempotencyKey);
    if (cached) {
      throw new IdempotencyItemAlreadyExistsError(
        `Failed to put record for already existing idempotency key: ${record.idempotencyKey}`, cached);
    }
    // The same event object handed to a second invocation while a first one
    // runs in this process (a Lambda gives each invocation its own event; a
    // test may not): the second waits here for the first to finish, then
    // claims as any invocation would (the first's result, or a run of its own
    // when the first gave the key up). Refusing it would not be safe: Powertools
    // 2.35's Middy middleware answers a refusal with a delete of this event,
    // which could only be taken as the first invocation's.
    for (let running = this.#invocations.get(data); running; running = this.#invocations.get(data)) {
      await running.finished;
    }
    await this.#claim(record, data, remainingTimeInMillis);
  }

  async saveSuccess(data, result) {
    const invocation = this.#take(data);
    try {
      await this.#complete(invocation, result);
    } finally {
      this.#end(data, invocation);
    }
  }

  async #complete(invocation, result) {
    const record = new IdempotencyRecord({
      idempotencyKey: invocation.key,
      status: IdempotencyRecordStatus.COMPLETED,
      expiryTimestamp: this.getExpiryTimestamp(),
      responseData: result,
      payloadHash: invocation.payloadHash,
    });
    const owned = { scope: this.#scope, key: invocation.key, fence: invocation.fence };
    const body = storedResult(result);
    if (invocation.client) {
      const { client } = invocation;
      let broken;
      try {
        await store.succeed(client, owned, 200, body);
        await client.query('COMMIT');
      } catch (error) {
        broken = error;
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.release(broken && !broken.code ? broken : undefined);
      }
    } else {
      await store.succeed(this.#pool, owned, 200, body);
    }
    this.saveToCache(record);
  }

  // The handler threw: undo its writes and give the key up, so a corrected
  // request runs under the same key (what Powertools' delete means).
  //
  // Only an invocation that claimed has anything to give up. Powertools
  // 2.35's Middy middleware (makeHandlerIdempotent) also deletes after its
  // own before hook refused the event: a concurrent twin
  // (IdempotencyAlreadyInProgressError), another payload
  // (IdempotencyValidationError), a claim that failed. The record is then
  // another invocation's (upstream aws-powertools/powertools-lambda-typescript
  // issue 5675, fixed after 2.35.0), so this is a no-op that lets the
  // refusal reach the caller; with a fixed Powertools it is simply never
  // reached (test/powertools_middy.test.js says which behaviour is installed).
  async deleteRecord(data) {
    const invocation = this.#invocations.get(data);
    if (!invocation || invocation.fence === null || invocation.taken) return;
    invocation.taken = true;
    try {
      if (invocation.client) {
        // A connection that broke has rolled back by ending: the key is given up either way.
        const { client } = invocation;
        await client.query('ROLLBACK').then(() => client.release(), (error) => client.release(error));
      }
      try {
        await store.release(this.#pool, { scope: this.#scope, key: invocation.key, fence: invocation.fence });
      } catch (error) {
        // Taken over by a retry meanwhile: the key is the new owner's now.
        if (error.code !== 'P4012' && error.code !== 'P4015') throw error;
      }
      this.deleteFromCache(invocation.key);
    } finally {
      this.#end(data, invocation);
    }
  }

  // Powertools reads a record by its key alone only when a put failed
  // without one; idem.peek answers that without writing.
  async _getRecord(idempotencyKey) {
    const row = await store.peek(this.#pool, this.#scope, idempotencyKey);
    if (!row) throw new IdempotencyPersistenceLayerError(`no record for ${idempotencyKey}`);
    return this.#recordOf(idempotencyKey, row, undefined);
  }

  async _putRecord(record) {
    await this.#claim(record, null, null);
  }

  async _updateRecord() {
    throw new IdempotencyPersistenceLayerError('IdemPersistenceLayer completes through saveSuccess(data, result), with the invocation\'s fence');
  }

  async _deleteRecord() {
    throw new IdempotencyPersistenceLayerError('IdemPersistenceLayer releases through deleteRecord(data), with the invocation\'s fence');
  }

  async #claim(record, data, remainingTimeInMillis) {
    // The event's entry is taken before the claim's first await, so a second
    // invocation with the same event object waits from the start.
    let finish;
    const invocation = {
      key: record.idempotencyKey, payloadHash: record.payloadHash, fence: null, client: null, taken: false,
      finished: new Promise((resolve) => { finish = resolve; }),
    };
    invocation.finish = finish;
    if (data !== null) this.#invocations.set(data, invocation);
    let owned = false;
    try {
      await this.#claimFor(invocation, record, remainingTimeInMillis);
      owned = true;
    } finally {
      if (!owned) this.#end(data, invocation);
    }
  }

  async #claimFor(invocation, record, remainingTimeInMillis) {
    const hash = record.payloadHash || NO_PAYLOAD_HASH;
    const lockTimeout = remainingTimeInMillis ? Math.max(remainingTimeInMillis, 1) / 1000 : this.#lockTimeout;
    const retention = Math.max(1, record.expiryTimestamp - Math.floor(Date.now() / 1000));
    let claim;
    try {
      claim = await store.claim(this.#pool, {
        scope: this.#scope, key: record.idempotencyKey, hash, claimedBy: this.#claimedBy, lockTimeout, retention,
      });
    } catch (error) {
      if (error.code === 'P4002') {
        // Stored under another payload: Powertools' validation names it.
        throw new IdempotencyItemAlreadyExistsError(
          `Failed to put record for already existing idempotency key: ${record.idempotencyKey}`,
          new IdempotencyRecord({
            idempotencyKey: record.idempotencyKey,
            status: store.storedStatus(error) === 'processing'
              ? IdempotencyRecordStatus.INPROGRESS : IdempotencyRecordStatus.COMPLETED,
            payloadHash: OTHER_PAYLOAD, expiryTimestamp: record.expiryTimestamp,
          }));
      }
      throw error;
    }
    if (!store.OWNED.has(claim.kind)) {
      throw new IdempotencyItemAlreadyExistsError(
        `Failed to put record for already existing idempotency key: ${record.idempotencyKey}`,
        this.#recordOf(record.idempotencyKey, claim, record.payloadHash));
    }
    invocation.fence = claim.fence;
    if (this.#transactional) {
      let client;
      try {
        client = await this.#pool.connect();
        await client.query('BEGIN');
      } catch (error) {
        if (client) client.release(error);
        // No transaction for the handler: the key is given up at once, since
        // Powertools sees a failed put and will not delete it.
        await store.release(this.#pool, { scope: this.#scope, key: record.idempotencyKey, fence: claim.fence }).catch(() => {});
        throw error;
      }
      invocation.client = client;
    }
  }

  #recordOf(idempotencyKey, row, payloadHash) {
    const running = row.kind === 'processing_active' || row.kind === 'processing_stale';
    return new IdempotencyRecord({
      idempotencyKey,
      status: running ? IdempotencyRecordStatus.INPROGRESS : IdempotencyRecordStatus.COMPLETED,
      inProgressExpiryTimestamp: row.locked_until ? new Date(row.locked_until).getTime() : undefined,
      responseData: replayedResult(row.stored),
      payloadHash,
    });
  }

  // The invocation's claim, for its one outcome; it stays the event's entry
  // until the outcome is stored (#end), so a second invocation with the same
  // event object claims after that.
  #take(data) {
    const invocation = this.#invocations.get(data);
    if (!invocation || invocation.fence === null || invocation.taken) {
      throw new IdempotencyPersistenceLayerError('IdemPersistenceLayer: this event holds no claim (saveInProgress first, with the same event object)');
    }
    invocation.taken = true;
    return invocation;
  }

  // The invocation is over for this layer: a second one with its event may claim.
  #end(data, invocation) {
    if (data !== null && this.#invocations.get(data) === invocation) this.#invocations.delete(data);
    invocation.finish();
  }
}

module.exports = { IdemPersistenceLayer };
