// The key store's statements other than the claim's writes, as the server
// runs them: an owner's outcome (src/keys/outcome.cpp), the purge and the
// sweep (src/keys/maintenance.cpp), the operator's tools
// (src/keys/key_tools.cpp) and a client's stored answer
// (also src/keys/outcome.cpp).
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

namespace idem::statement_sql {

// An owner's writes: $1 scope, $2 key, $3 fence, $4 now, then the outcome.
// Who may complete a key with a matching fence: its owner while processing,
// and still after the sweeper declared it abandoned, until a new claim or
// its expiry.
extern const char mark_succeeded[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = 'succeeded'::idem.idempotency_status,
    recovery_point = 'finished',
    response_code = $5,
    response_body = $6,
    result_ref_type = $7,
    result_ref_id = $8,
    failure_code = NULL,
    failure_message = NULL,
    locked_until = NULL,
    finished_at = $4,
    updated_at = $4
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
       OR (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text
           AND r.expires_at OPERATOR(pg_catalog.>) $4))
RETURNING r.claimed_at
)sql";

extern const char mark_failed[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = CASE WHEN $5 THEN 'failed_retryable'::idem.idempotency_status
                  ELSE 'failed_final'::idem.idempotency_status END,
    failure_code = $6,
    failure_message = $7,
    response_code = $8,
    response_body = $9,
    locked_until = NULL,
    finished_at = $4,
    updated_at = $4
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
       OR (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text
           AND r.expires_at OPERATOR(pg_catalog.>) $4))
RETURNING r.claimed_at
)sql";

extern const char set_recovery_point[] = R"sql(
UPDATE idem.idempotency_request AS r
SET recovery_point = $5,
    updated_at = $4
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
       OR (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text
           AND r.expires_at OPERATOR(pg_catalog.>) $4))
)sql";

// $1 scope, $2 key; columns in KeyFenceColumn order. Read after an owner's
// write or a tool matched no row, to say why, and by the worker after a
// completer ran, to see whether it recorded an outcome (the failure code
// tells the sweeper's 'abandoned', written after the run's lock ended, from
// an outcome: the worker may look at a run a round after it ended).
extern const char key_fence_and_status[] = R"sql(
SELECT r.fence, r.status::pg_catalog.text, r.failure_code
FROM idem.idempotency_request r
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
)sql";

// Oldest first, never an in-flight row, never a row a live transaction holds
// ($1 now, $2 the batch limit). The batch is addressed by the ctids its own
// FOR UPDATE locked (they cannot move before this statement ends): a TID
// scan, where joining back on the key made the planner hash the whole table
// for every batch.
extern const char purge_expired[] = R"sql(
WITH doomed AS (
  SELECT d.ctid AS tid
  FROM idem.idempotency_request d
  WHERE d.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
    AND d.expires_at OPERATOR(pg_catalog.<=) $1
  ORDER BY d.expires_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED)
DELETE FROM idem.idempotency_request r
WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed))
)sql";

// The oldest expired outcomes, read without a lock: maintenance.cpp deletes
// each by ctid without waiting, skipping any row changed or locked since.
extern const char purge_candidates[] = R"sql(
SELECT d.ctid
FROM idem.idempotency_request d
WHERE d.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
  AND d.expires_at OPERATOR(pg_catalog.<=) $1
ORDER BY d.expires_at
LIMIT $2
)sql";

// On a key table with bindings the sweep is two statements with a check in
// between (maintenance.cpp says why): first lock the candidates, a key
// whose lock ran out or whose bound session is not among the live tokens
// read before ($3), then mark, by ctid ($2), those still stale under the
// lock. $1 is now.
extern const char sweep_stale[] = R"sql(
SELECT s.ctid, s.bound_session, s.locked_until OPERATOR(pg_catalog.<=) $1
FROM idem.idempotency_request s
WHERE s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
  AND (s.locked_until OPERATOR(pg_catalog.<=) $1
       OR s.bound_session IS NOT NULL
          AND s.bound_session OPERATOR(pg_catalog.<>) ALL ($3))
ORDER BY s.locked_until
LIMIT $2
FOR UPDATE SKIP LOCKED
)sql";

// Fence and recovery point stay: the next claim resumes where the zombie was.
extern const char sweep_rows[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                  THEN 'failed_final'::idem.idempotency_status
                  ELSE 'failed_retryable'::idem.idempotency_status END,
    failure_code = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                        THEN 'expired' ELSE 'abandoned' END,
    failure_message = 'the owner recorded no outcome before its lock expired',
    locked_until = NULL,
    finished_at = $1,
    updated_at = $1
WHERE r.ctid OPERATOR(pg_catalog.=) ANY ($2)
)sql";

// The sweep of a 1.0 key table (no bindings; $3 unused), in one statement:
// sweep_rows over the rows it locks.
extern const char sweep_stale_10[] = R"sql(
WITH stale AS (
  SELECT s.ctid AS tid
  FROM idem.idempotency_request s
  WHERE s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
    AND s.locked_until OPERATOR(pg_catalog.<=) $1
  ORDER BY s.locked_until
  LIMIT $2
  FOR UPDATE SKIP LOCKED)
UPDATE idem.idempotency_request AS r
SET status = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                  THEN 'failed_final'::idem.idempotency_status
                  ELSE 'failed_retryable'::idem.idempotency_status END,
    failure_code = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                        THEN 'expired' ELSE 'abandoned' END,
    failure_message = 'the owner recorded no outcome before its lock expired',
    locked_until = NULL,
    finished_at = $1,
    updated_at = $1
WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT stale.tid FROM stale))
)sql";

// The operator's by-key tools return the whole row (a composite), then the
// status and fence the server log reports. $1 scope, $2 key.
extern const char lookup_key[] = R"sql(
SELECT r, r.status::pg_catalog.text, r.fence
FROM idem.idempotency_request r
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
)sql";

// $3 force: only then may an in-flight key go.
extern const char evict_key[] = R"sql(
DELETE FROM idem.idempotency_request AS r
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND (r.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status OR $3)
RETURNING r, r.status::pg_catalog.text, r.fence
)sql";

// Makes the key count as expired at $4 (never later than it already was, and
// still after created_at, which a CHECK demands). An in-flight key ($3 force)
// is ended as the sweeper ends an expired one, failed_final/'expired', so the
// next claim starts a new generation with a new fence.
extern const char force_expire_key[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status =
      CASE WHEN r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           THEN 'failed_final'::idem.idempotency_status
           ELSE r.status END,
    failure_code =
      CASE WHEN r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           THEN 'expired'::pg_catalog.text
           ELSE r.failure_code END,
    failure_message =
      CASE WHEN r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           THEN
           'expired by idem.force_expire before its owner recorded an outcome'::pg_catalog.text
           ELSE r.failure_message END,
    locked_until =
      CASE WHEN r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           THEN NULL
           ELSE r.locked_until END,
    finished_at =
      CASE WHEN r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           THEN $4
           ELSE r.finished_at END,
    updated_at = $4,
    expires_at =
      LEAST(r.expires_at,
            GREATEST($4,
                     r.created_at OPERATOR(pg_catalog.+) '1 microsecond'::pg_catalog.interval))
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND (r.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status OR $3)
RETURNING r, r.status::pg_catalog.text, r.fence
)sql";

// $5 extend_by. Never earlier than the lock already runs; an owner's key the
// sweeper declared abandoned (and nobody claimed since) is processing again.
extern const char extend_lock[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = 'processing'::idem.idempotency_status,
    locked_until = GREATEST(r.locked_until, $4 OPERATOR(pg_catalog.+) $5),
    failure_code = NULL,
    failure_message = NULL,
    finished_at = NULL,
    updated_at = $4
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
       OR (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text
           AND r.expires_at OPERATOR(pg_catalog.>) $4))
RETURNING r.locked_until
)sql";

// A completed key as idem.claim, as its replays carry it ($1 scope, $2 key).
extern const char stored_answer[] = R"sql(
SELECT idem.stored_answer($1, $2)
)sql";

// The owner gives its key up ($1 scope, $2 key, $3 fence, $4 now): the row
// goes, so the next claim is a new one with any request hash, and its fence,
// from idem.fence_seq, is above every fence before. Whoever may complete the
// key may release it: its owner while processing, and after the sweeper
// declared it abandoned, until a new claim or its expiry.
extern const char release_key[] = R"sql(
DELETE FROM idem.idempotency_request AS r
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
       OR (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text
           AND r.expires_at OPERATOR(pg_catalog.>) $4))
RETURNING r.fence
)sql";

// A worker round whose batch failed (a trigger that raises for one scope's
// rows, say) goes on scope by scope, so that one scope cannot stop the
// maintenance of the others (src/worker/worker.cpp). First the scopes that
// may have work for the stage, in a stable order: for the sweep every scope
// with a key in flight (a superset: the batch decides what is stale, and on
// a 1.0 table there is no binding to look at), for the purge those with an
// outcome past its expiry ($1: now).
extern const char scopes_to_sweep[] = R"sql(
SELECT s.scope
FROM idem.idempotency_request s
WHERE s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
GROUP BY s.scope
ORDER BY s.scope COLLATE pg_catalog."C"
)sql";

extern const char scopes_to_purge[] = R"sql(
SELECT d.scope
FROM idem.idempotency_request d
WHERE d.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
  AND d.expires_at OPERATOR(pg_catalog.<=) $1
GROUP BY d.scope
ORDER BY d.scope COLLATE pg_catalog."C"
)sql";

// Then the stage's statements as above, limited to the scope $4 (the
// sweeps; the 1.0 sweep leaves $3, the live tokens, unused) or $3 (the purges).
extern const char sweep_stale_in_scope[] = R"sql(
SELECT s.ctid, s.bound_session, s.locked_until OPERATOR(pg_catalog.<=) $1
FROM idem.idempotency_request s
WHERE s.scope OPERATOR(pg_catalog.=) $4
  AND s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
  AND (s.locked_until OPERATOR(pg_catalog.<=) $1
       OR s.bound_session IS NOT NULL
          AND s.bound_session OPERATOR(pg_catalog.<>) ALL ($3))
ORDER BY s.locked_until
LIMIT $2
FOR UPDATE SKIP LOCKED
)sql";

extern const char sweep_stale_10_in_scope[] = R"sql(
WITH stale AS (
  SELECT s.ctid AS tid
  FROM idem.idempotency_request s
  WHERE s.scope OPERATOR(pg_catalog.=) $4
    AND s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
    AND s.locked_until OPERATOR(pg_catalog.<=) $1
  ORDER BY s.locked_until
  LIMIT $2
  FOR UPDATE SKIP LOCKED)
UPDATE idem.idempotency_request AS r
SET status = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                  THEN 'failed_final'::idem.idempotency_status
                  ELSE 'failed_retryable'::idem.idempotency_status END,
    failure_code = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1
                        THEN 'expired' ELSE 'abandoned' END,
    failure_message = 'the owner recorded no outcome before its lock expired',
    locked_until = NULL,
    finished_at = $1,
    updated_at = $1
WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT stale.tid FROM stale))
)sql";

extern const char purge_expired_in_scope[] = R"sql(
WITH doomed AS (
  SELECT d.ctid AS tid
  FROM idem.idempotency_request d
  WHERE d.scope OPERATOR(pg_catalog.=) $3
    AND d.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
    AND d.expires_at OPERATOR(pg_catalog.<=) $1
  ORDER BY d.expires_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED)
DELETE FROM idem.idempotency_request r
WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed))
)sql";

extern const char purge_candidates_in_scope[] = R"sql(
SELECT d.ctid
FROM idem.idempotency_request d
WHERE d.scope OPERATOR(pg_catalog.=) $3
  AND d.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
  AND d.expires_at OPERATOR(pg_catalog.<=) $1
ORDER BY d.expires_at
LIMIT $2
)sql";

}  // namespace idem::statement_sql
