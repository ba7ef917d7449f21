// A persistence layer for Powertools for AWS Lambda's idempotency utility
// (@aws-lambda-powertools/idempotency 2.x) over idem. Powertools asks the
// layer to put an in-progress record, then to save the result or delete the
// record when the handler threw; idem does each in one call, and its fence
// travels from the claim to the outcome with the invocation's own event
// object (a WeakMap entry that goes when the event does), never in a map
// keyed by the idempotency key, which two invocations can share.
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

class IdemPersistenceLayer extends BasePersistenceLayer {
  #pool;
  #scope;
  #lockTimeout;
  #transactional;
  #claimedBy;
  #invocations = new WeakMap(); // the invocation's event object -> { fence, client }

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
    if (this.#invocations.has(data)) {
      // The same event object is being handled already in this process.
      throw new IdempotencyItemAlreadyExistsError(
        `An invocation with this event is in progress: ${record.idempotencyKey}`,
        new IdempotencyRecord({ ...record, status: IdempotencyRecordStatus.INPROGRESS }));
    }
    await this.#claim(record, data, remainingTimeInMillis);
  }

  async saveSuccess(data, result) {
    const record = new IdempotencyRecord({
      idempotencyKey: this.getHashedIdempotencyKey(data),
      status: IdempotencyRecordStatus.COMPLETED,
      expiryTimestamp: this.getExpiryTimestamp(),
      responseData: result,
      payloadHash: this.getHashedPayload(data),
    });
    const invocation = this.#take(data);
    const owned = { scope: this.#scope, key: record.idempotencyKey, fence: invocation.fence };
    const body = result === undefined ? null : JSON.stringify(result);
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
  async deleteRecord(data) {
    const key = this.getHashedIdempotencyKey(data);
    const invocation = this.#take(data);
    if (invocation.client) {
      await invocation.client.query('ROLLBACK').finally(() => invocation.client.release());
    }
    try {
      await store.release(this.#pool, { scope: this.#scope, key, fence: invocation.fence });
    } catch (error) {
      // Taken over by a retry meanwhile: the key is the new owner's now.
      if (error.code !== 'P4012' && error.code !== 'P4015') throw error;
    }
    this.deleteFromCache(key);
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
    if (store.OWNED.has(claim.kind)) {
      const invocation = { fence: claim.fence, client: null };
      if (this.#transactional) {
        const client = await this.#pool.connect();
        try {
          await client.query('BEGIN');
        } catch (error) {
          client.release(error);
          throw error;
        }
        invocation.client = client;
      }
      if (data !== null) this.#invocations.set(data, invocation);
      return;
    }
    throw new IdempotencyItemAlreadyExistsError(
      `Failed to put record for already existing idempotency key: ${record.idempotencyKey}`,
      this.#recordOf(record.idempotencyKey, claim, record.payloadHash));
  }

  #recordOf(idempotencyKey, row, payloadHash) {
    const running = row.kind === 'processing_active' || row.kind === 'processing_stale';
    return new IdempotencyRecord({
      idempotencyKey,
      status: running ? IdempotencyRecordStatus.INPROGRESS : IdempotencyRecordStatus.COMPLETED,
      inProgressExpiryTimestamp: row.locked_until ? new Date(row.locked_until).getTime() : undefined,
      responseData: row.stored === null || row.stored === undefined ? undefined : JSON.parse(row.stored),
      payloadHash,
    });
  }

  #take(data) {
    const invocation = this.#invocations.get(data);
    if (!invocation) {
      throw new IdempotencyPersistenceLayerError('IdemPersistenceLayer: this event holds no claim (saveInProgress first, with the same event object)');
    }
    this.#invocations.delete(data);
    return invocation;
  }
}

module.exports = { IdemPersistenceLayer };
