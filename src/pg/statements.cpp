// SPI's plan calls: this file prepares and keeps; spi_session.cpp executes.
#define IDEM_KEPT_STATEMENTS_IMPLEMENTATION 1
#include "pg/statements.hpp"

#include "pg/guard.hpp"
#include "pure/errors.hpp"

extern "C" {
#include "catalog/namespace.h"
}

namespace idem {

namespace {

// The row a claim reports, in ClaimColumn order; $3 is the caller's hash and
// $5 the claim's clock. BOUND is the bound_session column, or a NULL in its
// place on a key table still at 1.0 (see key_table_has_binding).
#define CLAIM_ROW_COLUMNS(BOUND)                                                 \
  "r.status::pg_catalog.text, "                                                  \
  "r.request_hash OPERATOR(pg_catalog.=) $3, "                                   \
  "r.locked_until OPERATOR(pg_catalog.<=) $5, "                                  \
  "r.expires_at OPERATOR(pg_catalog.<=) $5, "                                    \
  "r.fence, r.attempt_count, r.recovery_point, r.response_code, "                \
  "r.response_body, r.result_ref_type, r.result_ref_id, r.failure_code, "        \
  "r.failure_message, r.locked_until, r.expires_at, " BOUND

#define TABLE "idem.idempotency_request"
#define BY_KEY "r.scope OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) $2"
#define STATUS(label) "'" label "'::idem.idempotency_status"
#define NEXT_FENCE "pg_catalog.nextval('idem.fence_seq'::pg_catalog.regclass)"
#define CLAIM_LOCKED_UNTIL "$5 OPERATOR(pg_catalog.+) $6"
#define CLAIM_EXPIRES_AT \
  "CASE WHEN $7 IS NULL THEN 'infinity'::pg_catalog.timestamptz " \
  "ELSE $5 OPERATOR(pg_catalog.+) $7 END"
// Who may complete a key with a matching fence: its owner while processing,
// and still after the sweeper declared it abandoned, until a new claim or
// its expiry ($4 is the statement's clock).
#define OWNED_AT_4                                                                  \
  "(r.status OPERATOR(pg_catalog.=) " STATUS("processing") " OR "                   \
  "(r.status OPERATOR(pg_catalog.=) " STATUS("failed_retryable") " AND "            \
  "r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text AND "         \
  "r.expires_at OPERATOR(pg_catalog.>) $4))"

// Each claim statement comes in two variants: for 1.1's key table, and for a
// 1.0 table that ALTER EXTENSION idem UPDATE has not reached yet (no
// bound_session column; $10 and $11 are then unused).
#define BOUND_11 "r.bound_session"
#define BOUND_10 "NULL::pg_catalog.int8"

// Runs only after the claim's look (src/keys/claim.cpp, a key probe) found no
// row, so a replay never starts an INSERT executor, draws no fence, takes no
// lock and no transaction id. A concurrent claim that inserted first makes
// it return nothing (DO NOTHING, after waiting for that claim to commit or
// roll back), and the claim looks again.
#define INSERT_SQL(BOUND, BOUND_COLUMN, BOUND_VALUE)                                       \
  "INSERT INTO " TABLE " AS r (scope, key, request_hash, status, "                         \
  "recovery_point, fence, attempt_count, claimed_by, claimed_at, locked_until, "           \
  "created_at, updated_at, expires_at" BOUND_COLUMN ") "                                    \
  "VALUES ($1, $2, $3, " STATUS("processing") ", 'started', " NEXT_FENCE ", 1, $4, $5, "   \
  CLAIM_LOCKED_UNTIL ", $5, $5, " CLAIM_EXPIRES_AT BOUND_VALUE ") "                         \
  "ON CONFLICT (scope, key) DO NOTHING "                                                    \
  "RETURNING true, " CLAIM_ROW_COLUMNS(BOUND)

// Compare-and-swap on what the claim observed ($8 fence, $9 status): if
// anyone changed the row since, nothing matches and the claim looks again.
// A processing row is stale when its lock ran out, or when it is bound to
// the session $11 the claim found dead (session_binding.hpp).
#define TAKE_OVER_CAS(BOUND_ENDED)                                                         \
  BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $8 "                                         \
  "AND r.status OPERATOR(pg_catalog.=) $9::idem.idempotency_status "                       \
  "AND r.request_hash OPERATOR(pg_catalog.=) $3 "                                          \
  "AND (r.status OPERATOR(pg_catalog.=) " STATUS("failed_retryable")                       \
  " AND r.expires_at OPERATOR(pg_catalog.>) $5 "                                           \
  "OR r.status OPERATOR(pg_catalog.=) " STATUS("processing")                               \
  " AND (r.locked_until OPERATOR(pg_catalog.<=) $5" BOUND_ENDED ")) "
#define TAKE_OVER_SQL(BOUND, SET_BOUND, BOUND_ENDED)                                       \
  "UPDATE " TABLE " AS r SET status = " STATUS("processing") ", fence = " NEXT_FENCE        \
  ", attempt_count = r.attempt_count OPERATOR(pg_catalog.+) 1, claimed_by = $4, "          \
  "claimed_at = $5, locked_until = " CLAIM_LOCKED_UNTIL ", updated_at = $5, "              \
  "finished_at = NULL, response_code = NULL, response_body = NULL, " SET_BOUND             \
  "expires_at = GREATEST(r.expires_at, " CLAIM_EXPIRES_AT ") "                             \
  "WHERE " TAKE_OVER_CAS(BOUND_ENDED) "RETURNING false, " CLAIM_ROW_COLUMNS(BOUND)

#define REGENERATE_SQL(BOUND, SET_BOUND)                                                   \
  "UPDATE " TABLE " AS r SET request_hash = $3, status = " STATUS("processing")             \
  ", recovery_point = 'started', fence = " NEXT_FENCE ", attempt_count = 1, "               \
  "claimed_by = $4, claimed_at = $5, locked_until = " CLAIM_LOCKED_UNTIL ", "               \
  "response_code = NULL, response_body = NULL, result_ref_type = NULL, "                    \
  "result_ref_id = NULL, failure_code = NULL, failure_message = NULL, "                     \
  "created_at = $5, updated_at = $5, finished_at = NULL, " SET_BOUND                        \
  "expires_at = " CLAIM_EXPIRES_AT " WHERE " BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $8 " \
  "AND r.status OPERATOR(pg_catalog.<>) " STATUS("processing")                              \
  " AND r.expires_at OPERATOR(pg_catalog.<=) $5 "                                           \
  "RETURNING false, " CLAIM_ROW_COLUMNS(BOUND)

#define SET_BOUND_11 "bound_session = $10, "
#define BOUND_ENDED_11 " OR r.bound_session OPERATOR(pg_catalog.=) $11"

const char *const insert_sql = INSERT_SQL(BOUND_11, ", bound_session", ", $10");
const char *const take_over_sql = TAKE_OVER_SQL(BOUND_11, SET_BOUND_11, BOUND_ENDED_11);
const char *const regenerate_sql = REGENERATE_SQL(BOUND_11, SET_BOUND_11);
const char *const insert_10_sql = INSERT_SQL(BOUND_10, "", "");
const char *const take_over_10_sql = TAKE_OVER_SQL(BOUND_10, "", "");
const char *const regenerate_10_sql = REGENERATE_SQL(BOUND_10, "");

// $1 scope, $2 key, $3 fence, $4 now, then the outcome.
const char *const mark_succeeded_sql =
    "UPDATE " TABLE " AS r SET status = " STATUS("succeeded")
    ", recovery_point = 'finished', response_code = $5, response_body = $6, "
    "result_ref_type = $7, result_ref_id = $8, failure_code = NULL, "
    "failure_message = NULL, locked_until = NULL, finished_at = $4, updated_at = $4 "
    "WHERE " BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $3 AND " OWNED_AT_4
    " RETURNING r.claimed_at";

const char *const mark_failed_sql =
    "UPDATE " TABLE " AS r SET status = CASE WHEN $5 THEN " STATUS("failed_retryable")
    " ELSE " STATUS("failed_final") " END, failure_code = $6, failure_message = $7, "
    "response_code = $8, response_body = $9, locked_until = NULL, finished_at = $4, "
    "updated_at = $4 "
    "WHERE " BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $3 AND " OWNED_AT_4
    " RETURNING r.claimed_at";

const char *const set_recovery_point_sql =
    "UPDATE " TABLE " AS r SET recovery_point = $5, updated_at = $4 "
    "WHERE " BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $3 AND " OWNED_AT_4;

const char *const owner_fence_sql =
    "SELECT r.fence, r.status::pg_catalog.text FROM " TABLE " r WHERE " BY_KEY;

// Oldest first, never an in-flight row, never a row a live transaction holds.
// The batch is addressed by the ctids its own FOR UPDATE locked (they cannot
// move before this statement ends): a TID scan, where joining back on the key
// made the planner hash the whole table for every batch.
const char *const purge_expired_sql =
    "WITH doomed AS (SELECT d.ctid AS tid FROM " TABLE " d "
    "WHERE d.status OPERATOR(pg_catalog.<>) " STATUS("processing")
    " AND d.expires_at OPERATOR(pg_catalog.<=) $1 "
    "ORDER BY d.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "DELETE FROM " TABLE " r "
    "WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed))";

// The oldest expired outcomes, read without a lock: maintenance.cpp deletes
// each by ctid without waiting, skipping any row changed or locked since.
const char *const purge_candidates_sql =
    "SELECT d.ctid FROM " TABLE " d "
    "WHERE d.status OPERATOR(pg_catalog.<>) " STATUS("processing")
    " AND d.expires_at OPERATOR(pg_catalog.<=) $1 "
    "ORDER BY d.expires_at LIMIT $2";

// Fence and recovery point stay: the next claim resumes where the zombie was.
#define SWEEP_UPDATE                                                                       \
  "UPDATE " TABLE " AS r SET "                                                            \
  "status = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1 THEN "                      \
  STATUS("failed_final") " ELSE " STATUS("failed_retryable") " END, "                     \
  "failure_code = CASE WHEN r.expires_at OPERATOR(pg_catalog.<=) $1 THEN "                \
  "'expired' ELSE 'abandoned' END, "                                                      \
  "failure_message = 'the owner recorded no outcome before its lock expired', "           \
  "locked_until = NULL, finished_at = $1, updated_at = $1 "

// On a key table with bindings the sweep is two statements with a check in
// between (maintenance.cpp says why): first lock the candidates, a key
// whose lock ran out or whose bound session is not among the live tokens
// read before ($3), then mark, by ctid ($2), those still stale under the lock.
const char *const sweep_stale_sql =
    "SELECT s.ctid, s.bound_session, s.locked_until OPERATOR(pg_catalog.<=) $1 "
    "FROM " TABLE " s WHERE s.status OPERATOR(pg_catalog.=) " STATUS("processing")
    " AND (s.locked_until OPERATOR(pg_catalog.<=) $1 OR s.bound_session IS NOT NULL AND "
    "s.bound_session OPERATOR(pg_catalog.<>) ALL ($3)) "
    "ORDER BY s.locked_until LIMIT $2 FOR UPDATE SKIP LOCKED";
const char *const sweep_rows_sql = SWEEP_UPDATE "WHERE r.ctid OPERATOR(pg_catalog.=) ANY ($2)";

// The sweep of a 1.0 key table (no bindings; $3 unused), in one statement.
const char *const sweep_stale_10_sql =
    "WITH stale AS (SELECT s.ctid AS tid FROM " TABLE " s "
    "WHERE s.status OPERATOR(pg_catalog.=) " STATUS("processing")
    " AND s.locked_until OPERATOR(pg_catalog.<=) $1 "
    "ORDER BY s.locked_until LIMIT $2 FOR UPDATE SKIP LOCKED) " SWEEP_UPDATE
    "WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT stale.tid FROM stale))";
#undef SWEEP_UPDATE

// The operator's by-key tools return the whole row (a composite), then the
// status and fence the server log reports.
const char *const lookup_key_sql =
    "SELECT r, r.status::pg_catalog.text, r.fence FROM " TABLE " r WHERE " BY_KEY;

// $3 force: only then may an in-flight key go.
const char *const evict_key_sql =
    "DELETE FROM " TABLE " AS r WHERE " BY_KEY
    " AND (r.status OPERATOR(pg_catalog.<>) " STATUS("processing") " OR $3) "
    "RETURNING r, r.status::pg_catalog.text, r.fence";

// Makes the key count as expired at $4 (never later than it already was, and
// still after created_at, which a CHECK demands). An in-flight key ($3 force)
// is ended as the sweeper ends an expired one, failed_final/'expired', so the
// next claim starts a new generation with a new fence.
#define WHEN_PROCESSING "CASE WHEN r.status OPERATOR(pg_catalog.=) " STATUS("processing") " THEN "
const char *const force_expire_key_sql =
    "UPDATE " TABLE " AS r SET "
    "status = " WHEN_PROCESSING STATUS("failed_final") " ELSE r.status END, "
    "failure_code = " WHEN_PROCESSING "'expired'::pg_catalog.text ELSE r.failure_code END, "
    "failure_message = " WHEN_PROCESSING
    "'expired by idem.force_expire before its owner recorded an outcome'::pg_catalog.text "
    "ELSE r.failure_message END, "
    "locked_until = " WHEN_PROCESSING "NULL ELSE r.locked_until END, "
    "finished_at = " WHEN_PROCESSING "$4 ELSE r.finished_at END, "
    "updated_at = $4, "
    "expires_at = LEAST(r.expires_at, GREATEST($4, r.created_at OPERATOR(pg_catalog.+) "
    "'1 microsecond'::pg_catalog.interval)) "
    "WHERE " BY_KEY " AND (r.status OPERATOR(pg_catalog.<>) " STATUS("processing") " OR $3) "
    "RETURNING r, r.status::pg_catalog.text, r.fence";
#undef WHEN_PROCESSING

// $5 extend_by. Never earlier than the lock already runs; an owner's key the
// sweeper declared abandoned (and nobody claimed since) is processing again.
const char *const extend_lock_sql =
    "UPDATE " TABLE " AS r SET status = " STATUS("processing") ", "
    "locked_until = GREATEST(r.locked_until, $4 OPERATOR(pg_catalog.+) $5), "
    "failure_code = NULL, failure_message = NULL, finished_at = NULL, updated_at = $4 "
    "WHERE " BY_KEY " AND r.fence OPERATOR(pg_catalog.=) $3 AND " OWNED_AT_4 " "
    "RETURNING r.locked_until";

// ==== policy ====
// The takeover's compare-and-swap, ending the key instead of granting it:
// the claim that would start attempt max_attempts + 1 (scope_policy.cpp).
const char *const claim_give_up_sql =
    "UPDATE " TABLE " AS r SET status = " STATUS("failed_final")
    ", failure_code = 'too_many_attempts', "
    "failure_message = 'the key reached its scope''s max_attempts', "
    "locked_until = NULL, bound_session = NULL, finished_at = $5, updated_at = $5 "
    "WHERE " TAKE_OVER_CAS(BOUND_ENDED_11) "RETURNING false, " CLAIM_ROW_COLUMNS(BOUND_11);

const char *const policy_load_sql =
    "SELECT p.scope, p.lock_timeout, p.retention, p.keep_forever, p.max_attempts, "
    "p.bind_lock_to_session FROM idem.scope_policy p";

// Neither statement has an index to read abandoned keys by (a swept key is
// failed_retryable, in no partial index), so each scans the key table; an
// uncorrelated EXISTS over the policies becomes a one-time filter that skips
// the scan when no scope sets the column: a worker round on a million keys
// and no such policy takes 0.1 ms instead of 200 (bench/README.md, "The
// worker's idle rounds").
#define ANY_POLICY_WITH(column) \
  "EXISTS (SELECT FROM idem.scope_policy q WHERE q." column " IS NOT NULL)"

// Abandoned keys (swept, or processing with the lock run out) that used up
// their scope's max_attempts: what the next claim would record, recorded by
// the worker ($1 now, $2 batch limit), so neither the sweeper nor the
// completer tries them again.
#define TAKEN_OVER_ABLE(r)                                                            \
  "(" r ".status OPERATOR(pg_catalog.=) " STATUS("processing") " AND " r              \
  ".locked_until OPERATOR(pg_catalog.<=) $1 OR " r ".status OPERATOR(pg_catalog.=) "  \
  STATUS("failed_retryable") " AND " r ".failure_code OPERATOR(pg_catalog.=) "        \
  "'abandoned'::pg_catalog.text) AND " r ".expires_at OPERATOR(pg_catalog.>) $1"
const char *const exhaust_attempts_sql =
    "WITH done AS (SELECT s.ctid AS tid FROM " TABLE " s JOIN idem.scope_policy p "
    "ON p.scope OPERATOR(pg_catalog.=) s.scope "
    "WHERE " TAKEN_OVER_ABLE("s") " AND s.attempt_count OPERATOR(pg_catalog.>=) p.max_attempts "
    "AND " ANY_POLICY_WITH("max_attempts") " "
    "LIMIT $2 FOR UPDATE OF s SKIP LOCKED) "
    "UPDATE " TABLE " AS r SET status = " STATUS("failed_final")
    ", failure_code = 'too_many_attempts', "
    "failure_message = 'the key reached its scope''s max_attempts', "
    "locked_until = NULL, finished_at = $1, updated_at = $1 "
    "WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT done.tid FROM done))";

// Oldest first; "older than completer_delay" counts from the end of the
// lock, or from the sweep for a swept key. The completer is stored by its
// qualified name (the policy trigger wrote it; pg_upgrade carries no
// function OID), resolved here at each round: InvalidOid when no such
// function exists any more, which the round logs instead of running it.
const char *const completer_candidates_sql =
    "SELECT r.scope, r.key, r.request_hash, "
    "COALESCE(pg_catalog.to_regprocedure(p.completer)::pg_catalog.oid, '0'::pg_catalog.oid) "
    "FROM idem.scope_policy p JOIN " TABLE " r ON r.scope OPERATOR(pg_catalog.=) p.scope "
    "WHERE p.completer IS NOT NULL AND " TAKEN_OVER_ABLE("r") " AND " ANY_POLICY_WITH("completer")
    " AND COALESCE(r.locked_until, r.updated_at) OPERATOR(pg_catalog.<=) ($1 "
    "OPERATOR(pg_catalog.-) COALESCE(p.completer_delay, '0'::pg_catalog.interval)) "
    "ORDER BY COALESCE(r.locked_until, r.updated_at) LIMIT $2";
#undef TAKEN_OVER_ABLE
#undef ANY_POLICY_WITH

// The worker claims as a client would (precedence, max_attempts, the
// compare-and-swap): exactly one of it and a late retry owns the key.
const char *const completer_claim_sql =
    "SELECT c.kind::pg_catalog.text, c.fence, c.recovery_point, c.attempt_count, c.locked_until "
    "FROM idem.claim_idempotency_key($1, $2, $3, 'idem completer') c";

const char *const completer_outcome_sql =
    "SELECT r.status::pg_catalog.text, r.fence FROM " TABLE " r WHERE " BY_KEY;



constexpr int max_params = 11;

struct StatementSpec {
  const char *sql;
  int nargs;
  Oid argtypes[max_params];
  int expected_result;  // SPI_OK_* code
};

// ==== inbox ====
// Runs only after consume_once's key probe (src/keys/key_probe.hpp) found no
// live row. The conflict waits for a twin's in-flight insert: when the twin
// commits, nothing is returned and the caller looks again (a replay); when
// it rolls back, this row goes in. An expired row ($4 the clock, $5 the new
// expiry) is renewed in place, as if the purger had deleted it.
const char *const inbox_insert_sql =
    "INSERT INTO idem.consumed_message AS m "
    "(consumer, message_id, message_hash, consumed_at, expires_at) "
    "VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT ON CONSTRAINT consumed_message_pkey DO UPDATE "
    "SET message_hash = excluded.message_hash, consumed_at = excluded.consumed_at, "
    "expires_at = excluded.expires_at, result_ref_type = NULL, result_ref_id = NULL "
    "WHERE m.expires_at OPERATOR(pg_catalog.<=) $4 RETURNING true";

// $1 consumer, $2 message_id, $3 and $4 the result reference, $5 the clock.
const char *const inbox_set_result_sql =
    "UPDATE idem.consumed_message m SET result_ref_type = $3, result_ref_id = $4 "
    "WHERE m.consumer OPERATOR(pg_catalog.=) $1 AND m.message_id OPERATOR(pg_catalog.=) $2 "
    "AND m.expires_at OPERATOR(pg_catalog.>) $5";

// outbox_put: $1 scope, $2 key, $3 event_type, $4 payload, $5 aggregate_type,
// $6 aggregate_id, $7 headers, $8 available_at (NULL: now), $9 the clock.
const char *const outbox_insert_sql =
    "INSERT INTO idem.outbox_event (scope, key, event_type, payload, aggregate_type, "
    "aggregate_id, headers, delivery_key, available_at, created_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, "
    "idem.request_hash(pg_catalog.jsonb_build_array($1, $2, $3)), "
    "COALESCE($8, $9), $9) "
    "ON CONFLICT ON CONSTRAINT outbox_event_identity DO NOTHING RETURNING id";
const char *const outbox_existing_sql =
    "SELECT e.id, e.payload OPERATOR(pg_catalog.=) $4 FROM idem.outbox_event e "
    "WHERE e.scope OPERATOR(pg_catalog.=) $1 AND e.key OPERATOR(pg_catalog.=) $2 "
    "AND e.event_type OPERATOR(pg_catalog.=) $3";
// $1 id, $2 lease fence, $3 the clock.
const char *const outbox_published_sql =
    "UPDATE idem.outbox_event e SET status = 'published'::idem.outbox_status, "
    "published_at = $3, leased_until = NULL, lease_fence = NULL, last_error = NULL "
    "WHERE e.id OPERATOR(pg_catalog.=) $1 "
    "AND e.status OPERATOR(pg_catalog.=) 'leased'::idem.outbox_status "
    "AND e.lease_fence OPERATOR(pg_catalog.=) $2";
// $1 the clock, $2 the lease, $3 event types (NULL: all), $4 the batch
// limit. An event is due when it is pending (or its lease ran out) and
// available, and no earlier event of its aggregate is pending or leased: an
// aggregate's events go out one at a time, in id order. SKIP LOCKED: two
// relays never wait for, or get, the same event. The status lists are
// written as = ANY of an array so that their operator is named (the same
// expression the partial indexes' IN lists parse to); IS NOT DISTINCT FROM
// has no such form and finds its = by name: only the pinned search_path of
// every caller (spi_session.hpp) keeps a caller's text = text out of it.
#define OPEN_STATUS(alias) \
  alias ".status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::idem.outbox_status[])"
const char *const outbox_lease_sql =
    "WITH due AS (SELECT e.id AS due_id FROM idem.outbox_event e "
    "WHERE " OPEN_STATUS("e") " "
    "AND (e.status OPERATOR(pg_catalog.=) 'pending' OR e.leased_until OPERATOR(pg_catalog.<=) $1) "
    "AND e.available_at OPERATOR(pg_catalog.<=) $1 "
    "AND ($3 IS NULL OR e.event_type OPERATOR(pg_catalog.=) ANY ($3)) "
    "AND NOT EXISTS (SELECT FROM idem.outbox_event p WHERE e.aggregate_id IS NOT NULL "
    "AND " OPEN_STATUS("p") " AND p.aggregate_id IS NOT NULL "
    "AND p.aggregate_type IS NOT DISTINCT FROM e.aggregate_type "
    "AND p.aggregate_id OPERATOR(pg_catalog.=) e.aggregate_id "
    "AND p.id OPERATOR(pg_catalog.<) e.id) "
    "ORDER BY e.id LIMIT $4 FOR UPDATE OF e SKIP LOCKED) "
    "UPDATE idem.outbox_event o SET status = 'leased'::idem.outbox_status, "
    "lease_fence = pg_catalog.nextval('idem.outbox_lease_fence_seq'::pg_catalog.regclass), "
    "leased_until = $1 OPERATOR(pg_catalog.+) $2, "
    "attempt_count = o.attempt_count OPERATOR(pg_catalog.+) 1 "
    "FROM due WHERE o.id OPERATOR(pg_catalog.=) due.due_id "
    "RETURNING o.id, o.lease_fence, o.scope, o.key, o.event_type, o.aggregate_type, "
    "o.aggregate_id, o.payload, o.headers, o.attempt_count, o.delivery_key";
#undef OPEN_STATUS
const char *const outbox_event_state_sql =
    "SELECT e.status::pg_catalog.text, e.lease_fence FROM idem.outbox_event e "
    "WHERE e.id OPERATOR(pg_catalog.=) $1";

#define CLAIM_PARAM_TYPES                                                                 \
  {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INTERVALOID, INTERVALOID, INT8OID, \
   TEXTOID, INT8OID, INT8OID}

const StatementSpec specs[] = {
    // claim_* share one parameter list (ClaimParam)
    {insert_sql, claim_param_count,
     CLAIM_PARAM_TYPES,
     SPI_OK_INSERT_RETURNING},
    {take_over_sql, claim_param_count,
     CLAIM_PARAM_TYPES,
     SPI_OK_UPDATE_RETURNING},
    {regenerate_sql, claim_param_count,
     CLAIM_PARAM_TYPES,
     SPI_OK_UPDATE_RETURNING},
    {mark_succeeded_sql, 8,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, TEXTOID, TEXTOID},
     SPI_OK_UPDATE_RETURNING},
    {mark_failed_sql, 9,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, BOOLOID, TEXTOID, TEXTOID, INT4OID, JSONBOID},
     SPI_OK_UPDATE_RETURNING},
    {set_recovery_point_sql, 5, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID},
     SPI_OK_UPDATE},
    {owner_fence_sql, 2, {TEXTOID, TEXTOID}, SPI_OK_SELECT},
    {purge_expired_sql, 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_DELETE},
    {purge_candidates_sql, 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_SELECT},
    {sweep_stale_sql, 3, {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID}, SPI_OK_SELECT},
    {sweep_rows_sql, 2, {TIMESTAMPTZOID, TIDARRAYOID}, SPI_OK_UPDATE},
    {lookup_key_sql, 2, {TEXTOID, TEXTOID}, SPI_OK_SELECT},
    {evict_key_sql, 3, {TEXTOID, TEXTOID, BOOLOID}, SPI_OK_DELETE_RETURNING},
    {force_expire_key_sql, 4, {TEXTOID, TEXTOID, BOOLOID, TIMESTAMPTZOID},
     SPI_OK_UPDATE_RETURNING},
    // inbox: $1 (the batch's time) is unused, the SQL functions read their own.
    {"SELECT idem.purge_consumed($2)", 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_SELECT},
    {"SELECT idem.purge_published($2)", 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_SELECT},
    {extend_lock_sql, 5, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INTERVALOID},
     SPI_OK_UPDATE_RETURNING},
    // the same, for a key table still at 1.0
    {insert_10_sql, claim_param_count, CLAIM_PARAM_TYPES, SPI_OK_INSERT_RETURNING},
    {take_over_10_sql, claim_param_count, CLAIM_PARAM_TYPES, SPI_OK_UPDATE_RETURNING},
    {regenerate_10_sql, claim_param_count, CLAIM_PARAM_TYPES, SPI_OK_UPDATE_RETURNING},
    {sweep_stale_10_sql, 3, {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID}, SPI_OK_UPDATE},
    {claim_give_up_sql, claim_param_count, CLAIM_PARAM_TYPES, SPI_OK_UPDATE_RETURNING},
    {policy_load_sql, 0, {}, SPI_OK_SELECT},
    {exhaust_attempts_sql, 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_UPDATE},
    {completer_candidates_sql, 2, {TIMESTAMPTZOID, INT4OID}, SPI_OK_SELECT},
    {completer_claim_sql, 3, {TEXTOID, TEXTOID, TEXTOID}, SPI_OK_SELECT},
    {completer_outcome_sql, 2, {TEXTOID, TEXTOID}, SPI_OK_SELECT},
    {inbox_insert_sql, 5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
     SPI_OK_INSERT_RETURNING},
    {inbox_set_result_sql, 5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID},
     SPI_OK_UPDATE},
    {outbox_insert_sql, 9,
     {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID,
      TIMESTAMPTZOID},
     SPI_OK_INSERT_RETURNING},
    {outbox_existing_sql, 4, {TEXTOID, TEXTOID, TEXTOID, JSONBOID}, SPI_OK_SELECT},
    {outbox_published_sql, 3, {INT8OID, INT8OID, TIMESTAMPTZOID}, SPI_OK_UPDATE},
    {outbox_event_state_sql, 1, {INT8OID}, SPI_OK_SELECT},
    {outbox_lease_sql, 4, {TIMESTAMPTZOID, INTERVALOID, TEXTARRAYOID, INT4OID},
     SPI_OK_UPDATE_RETURNING},
    // clients
    {"SELECT idem.stored_answer($1, $2)", 2, {TEXTOID, TEXTOID}, SPI_OK_SELECT},
};
#undef CLAIM_PARAM_TYPES

constexpr int statement_count = sizeof specs / sizeof specs[0];
static_assert(statement_count == static_cast<int>(Statement::stored_answer) + 1,
              "one spec per Statement");

// Kept plans live for the backend's life; Postgres replans them by name
// when the objects behind them change (for example DROP/CREATE EXTENSION).
SPIPlanPtr kept_plans[statement_count];

SPIPlanPtr plan_for(Statement statement) {
  int index = static_cast<int>(statement);
  if (kept_plans[index] == nullptr) {
    const StatementSpec &spec = specs[index];
    SPIPlanPtr plan = SPI_prepare(spec.sql, spec.nargs, const_cast<Oid *>(spec.argtypes));
    if (plan == nullptr) raise_spi_failure("SPI_prepare", SPI_result);
    int kept = SPI_keepplan(plan);
    if (kept != 0) raise_spi_failure("SPI_keepplan", kept);
    kept_plans[index] = plan;
  }
  return kept_plans[index];
}

}  // namespace

void raise_spi_failure(const char *what, int code, SourceLocation where) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::internal), errmsg("idem: %s failed", what),
                          errdetail("SPI result: %s", SPI_result_code_string(code)),
                          errhint("This is a bug in idem; please report it.")));
}

namespace {

// key_table_has_binding's answer, kept per backend: every claim asks, and the
// names cost three catalog lookups. Forgotten when the table's relcache entry
// is invalidated (ALTER TABLE, DROP, DROP EXTENSION) or any schema changes.
struct KnownKeyTable {
  bool known;
  Oid table;
  bool has_binding;
};
KnownKeyTable known_key_table = {false, InvalidOid, false};
bool key_table_callbacks_registered = false;

void forget_key_table(Datum, Oid relation) {
  if (!OidIsValid(relation) || relation == known_key_table.table) known_key_table.known = false;
}

void forget_key_table_schema(Datum, int, uint32) { known_key_table.known = false; }

}  // namespace

bool key_table_has_binding() {
  if (known_key_table.known) return known_key_table.has_binding;
  Oid schema = get_namespace_oid("idem", true);
  Oid table = OidIsValid(schema) ? get_relname_relid("idempotency_request", schema) : InvalidOid;
  if (!OidIsValid(table)) return false;  // not kept: the extension is not (yet) there
  bool has_binding = get_attnum(table, "bound_session") != InvalidAttrNumber;
  if (!key_table_callbacks_registered) {
    CacheRegisterRelcacheCallback(forget_key_table, 0);
    CacheRegisterSyscacheCallback(NAMESPACEOID, forget_key_table_schema, 0);
    key_table_callbacks_registered = true;
  }
  known_key_table = {true, table, has_binding};
  return has_binding;
}

Statement for_key_table(Statement statement, bool has_binding) {
  if (has_binding) return statement;
  switch (statement) {
    case Statement::claim_insert: return Statement::claim_insert_10;
    case Statement::claim_take_over: return Statement::claim_take_over_10;
    case Statement::claim_regenerate: return Statement::claim_regenerate_10;
    case Statement::sweep_stale: return Statement::sweep_stale_10;
    default: return statement;
  }
}

KeptStatement kept_statement(Statement statement) {
  return KeptStatement{plan_for(statement), specs[static_cast<int>(statement)].expected_result};
}

}  // namespace idem
