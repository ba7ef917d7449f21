// The idem calls both adapters make, as single statements on a node-postgres
// pool or client. Intervals are given as seconds (a number) or as
// PostgreSQL interval text; null means idem's own setting.
'use strict';

function interval(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') {
    if (!(value > 0)) throw new RangeError(`an interval must be positive, not ${value}`);
    return `${value} seconds`;
  }
  return String(value);
}

// What a claim answers, with the stored answer as the text idem keeps (so a
// replay sends exactly the bytes the first answer sent), Retry-After, and
// the server process the claim ran on.
const CLAIM_COLUMNS = `c.kind::text AS kind, c.fence, c.recovery_point, c.response_code,
       c.response_body::text AS stored, c.failure_code, c.locked_until,
       idem.retry_after($1, c) AS retry_after, pg_backend_pid() AS backend_pid`;

// bind: idem.bind_lock_to_session on for this claim only. set_config(..., true)
// lasts for the claim's own transaction (the statement), so nothing is left on
// a pooled connection; the claim reads b.bound, so the setting comes first.
async function claim(db, { scope, key, hash, claimedBy = null, lockTimeout = null, retention = null, wait = null, bind = false }) {
  const args = [scope, key, hash, claimedBy, interval(lockTimeout), interval(retention)];
  const scopeArg = bind ? 'CASE WHEN b.bound IS NOT NULL THEN $1 END' : '$1';
  const call = wait === null || wait === undefined
    ? `idem.claim_idempotency_key(${scopeArg}, $2, $3, $4, $5::interval, $6::interval)`
    : `idem.claim_or_wait(${scopeArg}, $2, $3, $7::interval, $4, $5::interval, $6::interval)`;
  if (wait !== null && wait !== undefined) args.push(interval(wait));
  const from = bind
    ? `(SELECT pg_catalog.set_config('idem.bind_lock_to_session', 'on', true) AS bound) b CROSS JOIN LATERAL ${call} c`
    : `${call} c`;
  return (await db.query(`SELECT ${CLAIM_COLUMNS} FROM ${from}`, args)).rows[0];
}

const OWNED = new Set(['new_claim', 'processing_stale', 'retryable_failure']);
const REPLAYED = new Set(['replay_success', 'final_failure']);

// The outcome, in the caller's transaction when db is a client inside one.
async function succeed(db, { scope, key, fence }, code, bodyText) {
  const { rows } = await db.query(
    `SELECT a.response_code, a.response_body::text AS stored, pg_backend_pid() AS backend_pid
       FROM idem.mark_succeeded_returning($1, $2, $3, $4, $5::jsonb) a`,
    [scope, key, fence, code, bodyText]);
  return rows[0];
}

async function failFinal(db, { scope, key, fence }, code, bodyText) {
  const { rows } = await db.query(
    `SELECT a.response_code, a.response_body::text AS stored, pg_backend_pid() AS backend_pid
       FROM idem.mark_failed_returning($1, $2, $3, false, $4, NULL, $5, $6::jsonb) a`,
    [scope, key, fence, `http_${code}`, code, bodyText]);
  return rows[0];
}

async function failRetryable(db, { scope, key, fence }, failureCode, message) {
  await db.query('SELECT idem.mark_failed($1, $2, $3, true, $4, $5)',
    [scope, key, fence, failureCode, message]);
}

// The owner forgets its key: the next claim starts afresh, with any body.
async function release(db, { scope, key, fence }) {
  await db.query('SELECT idem.release($1, $2, $3)', [scope, key, fence]);
}

// A read by key that writes nothing: null when the key is unknown.
async function peek(db, scope, key) {
  const { rows } = await db.query(
    `SELECT c.kind::text AS kind, c.response_code, c.response_body::text AS stored,
            c.locked_until, c.expires_at
       FROM idem.peek($1, $2) c WHERE c.kind IS NOT NULL`, [scope, key]);
  return rows[0] || null;
}

// P4002's detail ends with the stored request's status (idem 1.2):
// processing, succeeded, failed_retryable or failed_final; null before 1.2.
function storedStatus(error) {
  const m = /the stored request's status is ([a-z_]+)$/.exec((error && error.detail) || '');
  return m ? m[1] : null;
}

module.exports = { storedStatus, interval, claim, succeed, failFinal, failRetryable, release, peek, OWNED, REPLAYED };
