// The claim's writes (src/keys/claim.cpp), as the server runs them. Each
// comes twice: for 1.1's key table, and for a 1.0 table that ALTER EXTENSION
// idem UPDATE has not reached yet (no bound_session column: the row reports
// a NULL in its place, and $10 and $11 are unused).
//
// Parameters (ClaimParam, statement_text.hpp): $1 scope, $2 key, $3 the
// caller's request hash, $4 claimed_by, $5 the claim's clock, $6 the lock
// timeout, $7 the retention (NULL: never expires), $8 and $9 the fence and
// status the claim observed, $10 this session's token when
// idem.bind_lock_to_session is on, $11 the dead session the observed row was
// bound to. Every statement returns the row in ClaimColumn order.
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

namespace idem::statement_sql {

// Runs only after the claim's look (a key probe) found no row, so a replay
// never starts an INSERT executor, draws no fence, takes no lock and no
// transaction id. A concurrent claim that inserted first makes it return
// nothing (DO NOTHING, after waiting for that claim to commit or roll back),
// and the claim looks again.
extern const char claim_insert[] = R"sql(
INSERT INTO idem.idempotency_request AS r (
  scope, key, request_hash, status, recovery_point, fence, attempt_count,
  claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at,
  bound_session)
VALUES (
  $1, $2, $3,
  'processing'::idem.idempotency_status,
  'started',
  pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
  1,
  $4, $5,
  $5 OPERATOR(pg_catalog.+) $6,
  $5, $5,
  CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
       ELSE $5 OPERATOR(pg_catalog.+) $7 END,
  $10)
ON CONFLICT (scope, key) DO NOTHING
RETURNING
  true,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  r.bound_session
)sql";

// Compare-and-swap on what the claim observed ($8 fence, $9 status): if
// anyone changed the row since, nothing matches and the claim looks again.
// A processing row is stale when its lock ran out, or when it is bound to
// the session $11 the claim found dead (session_binding.hpp).
extern const char claim_take_over[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = 'processing'::idem.idempotency_status,
    fence = pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
    attempt_count = r.attempt_count OPERATOR(pg_catalog.+) 1,
    claimed_by = $4,
    claimed_at = $5,
    locked_until = $5 OPERATOR(pg_catalog.+) $6,
    updated_at = $5,
    finished_at = NULL,
    response_code = NULL,
    response_body = NULL,
    bound_session = $10,
    expires_at = GREATEST(r.expires_at,
                          CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
                               ELSE $5 OPERATOR(pg_catalog.+) $7 END)
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $8
  AND r.status OPERATOR(pg_catalog.=) $9::idem.idempotency_status
  AND r.request_hash OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
         AND r.expires_at OPERATOR(pg_catalog.>) $5
       OR r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
         AND (r.locked_until OPERATOR(pg_catalog.<=) $5
              OR r.bound_session OPERATOR(pg_catalog.=) $11))
RETURNING
  false,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  r.bound_session
)sql";

// A finished key whose retention ran out: a new generation, with the new
// caller's hash, on the same row.
extern const char claim_regenerate[] = R"sql(
UPDATE idem.idempotency_request AS r
SET request_hash = $3,
    status = 'processing'::idem.idempotency_status,
    recovery_point = 'started',
    fence = pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
    attempt_count = 1,
    claimed_by = $4,
    claimed_at = $5,
    locked_until = $5 OPERATOR(pg_catalog.+) $6,
    response_code = NULL,
    response_body = NULL,
    result_ref_type = NULL,
    result_ref_id = NULL,
    failure_code = NULL,
    failure_message = NULL,
    created_at = $5,
    updated_at = $5,
    finished_at = NULL,
    bound_session = $10,
    expires_at = CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
                      ELSE $5 OPERATOR(pg_catalog.+) $7 END
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $8
  AND r.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
  AND r.expires_at OPERATOR(pg_catalog.<=) $5
RETURNING
  false,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  r.bound_session
)sql";

// claim_insert on a 1.0 key table.
extern const char claim_insert_10[] = R"sql(
INSERT INTO idem.idempotency_request AS r (
  scope, key, request_hash, status, recovery_point, fence, attempt_count,
  claimed_by, claimed_at, locked_until, created_at, updated_at, expires_at)
VALUES (
  $1, $2, $3,
  'processing'::idem.idempotency_status,
  'started',
  pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
  1,
  $4, $5,
  $5 OPERATOR(pg_catalog.+) $6,
  $5, $5,
  CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
       ELSE $5 OPERATOR(pg_catalog.+) $7 END)
ON CONFLICT (scope, key) DO NOTHING
RETURNING
  true,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  NULL::pg_catalog.int8
)sql";

// claim_take_over on a 1.0 key table: only a run-out lock makes a
// processing row stale.
extern const char claim_take_over_10[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = 'processing'::idem.idempotency_status,
    fence = pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
    attempt_count = r.attempt_count OPERATOR(pg_catalog.+) 1,
    claimed_by = $4,
    claimed_at = $5,
    locked_until = $5 OPERATOR(pg_catalog.+) $6,
    updated_at = $5,
    finished_at = NULL,
    response_code = NULL,
    response_body = NULL,
    expires_at = GREATEST(r.expires_at,
                          CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
                               ELSE $5 OPERATOR(pg_catalog.+) $7 END)
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $8
  AND r.status OPERATOR(pg_catalog.=) $9::idem.idempotency_status
  AND r.request_hash OPERATOR(pg_catalog.=) $3
  AND (r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
         AND r.expires_at OPERATOR(pg_catalog.>) $5
       OR r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
         AND (r.locked_until OPERATOR(pg_catalog.<=) $5))
RETURNING
  false,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  NULL::pg_catalog.int8
)sql";

// claim_regenerate on a 1.0 key table.
extern const char claim_regenerate_10[] = R"sql(
UPDATE idem.idempotency_request AS r
SET request_hash = $3,
    status = 'processing'::idem.idempotency_status,
    recovery_point = 'started',
    fence = pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass),
    attempt_count = 1,
    claimed_by = $4,
    claimed_at = $5,
    locked_until = $5 OPERATOR(pg_catalog.+) $6,
    response_code = NULL,
    response_body = NULL,
    result_ref_type = NULL,
    result_ref_id = NULL,
    failure_code = NULL,
    failure_message = NULL,
    created_at = $5,
    updated_at = $5,
    finished_at = NULL,
    expires_at = CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz
                      ELSE $5 OPERATOR(pg_catalog.+) $7 END
WHERE r.scope OPERATOR(pg_catalog.=) $1
  AND r.key OPERATOR(pg_catalog.=) $2
  AND r.fence OPERATOR(pg_catalog.=) $8
  AND r.status OPERATOR(pg_catalog.<>) 'processing'::idem.idempotency_status
  AND r.expires_at OPERATOR(pg_catalog.<=) $5
RETURNING
  false,
  r.status::pg_catalog.text,
  r.request_hash OPERATOR(pg_catalog.=) $3,
  r.locked_until OPERATOR(pg_catalog.<=) $5,
  r.expires_at OPERATOR(pg_catalog.<=) $5,
  r.fence, r.attempt_count, r.recovery_point, r.response_code, r.response_body,
  r.result_ref_type, r.result_ref_id, r.failure_code, r.failure_message,
  r.locked_until, r.expires_at,
  NULL::pg_catalog.int8
)sql";

}  // namespace idem::statement_sql
