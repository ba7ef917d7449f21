// The inbox's and the outbox's statements (src/messages/inbox.cpp,
// src/messages/outbox.cpp, src/messages/message_maintenance.cpp), as the
// server runs them.
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

namespace idem::statement_sql {

// One batch of the SQL functions' purges, for the worker and the
// maintenance calls: $1 (the batch's time) is unused, the functions read
// their own clock; $2 is the batch limit.
extern const char purge_consumed[] = R"sql(
SELECT idem.purge_consumed($2)
)sql";

extern const char purge_published[] = R"sql(
SELECT idem.purge_published($2)
)sql";

// Runs only after consume_once's key probe (src/keys/key_probe.hpp) found no
// live row. The conflict waits for a twin's in-flight insert: when the twin
// commits, nothing is returned and the caller looks again (a replay); when
// it rolls back, this row goes in. An expired row ($4 the clock, $5 the new
// expiry) is renewed in place, as if the purger had deleted it.
extern const char inbox_insert[] = R"sql(
INSERT INTO idem.consumed_message AS m (
  consumer, message_id, message_hash, consumed_at, expires_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT ON CONSTRAINT consumed_message_pkey DO UPDATE
SET message_hash = excluded.message_hash,
    consumed_at = excluded.consumed_at,
    expires_at = excluded.expires_at,
    result_ref_type = NULL,
    result_ref_id = NULL
WHERE m.expires_at OPERATOR(pg_catalog.<=) $4
RETURNING true
)sql";

// $1 consumer, $2 message_id, $3 and $4 the result reference, $5 the clock.
extern const char inbox_set_result[] = R"sql(
UPDATE idem.consumed_message m
SET result_ref_type = $3,
    result_ref_id = $4
WHERE m.consumer OPERATOR(pg_catalog.=) $1
  AND m.message_id OPERATOR(pg_catalog.=) $2
  AND m.expires_at OPERATOR(pg_catalog.>) $5
)sql";

// outbox_put: $1 scope, $2 key, $3 event_type, $4 payload, $5 aggregate_type,
// $6 aggregate_id, $7 headers, $8 available_at (NULL: now), $9 the clock.
extern const char outbox_insert[] = R"sql(
INSERT INTO idem.outbox_event (
  scope, key, event_type, payload, aggregate_type, aggregate_id, headers,
  delivery_key, available_at, created_at)
VALUES (
  $1, $2, $3, $4, $5, $6, $7,
  idem.request_hash(pg_catalog.jsonb_build_array($1, $2, $3)),
  COALESCE($8, $9),
  $9)
ON CONFLICT ON CONSTRAINT outbox_event_identity DO NOTHING
RETURNING id
)sql";

// The same parameters' first four, after outbox_insert met its conflict.
extern const char outbox_existing[] = R"sql(
SELECT e.id, e.payload OPERATOR(pg_catalog.=) $4
FROM idem.outbox_event e
WHERE e.scope OPERATOR(pg_catalog.=) $1
  AND e.key OPERATOR(pg_catalog.=) $2
  AND e.event_type OPERATOR(pg_catalog.=) $3
)sql";

// $1 id, $2 lease fence, $3 the clock.
extern const char outbox_published[] = R"sql(
UPDATE idem.outbox_event e
SET status = 'published'::idem.outbox_status,
    published_at = $3,
    leased_until = NULL,
    lease_fence = NULL,
    last_error = NULL
WHERE e.id OPERATOR(pg_catalog.=) $1
  AND e.status OPERATOR(pg_catalog.=) 'leased'::idem.outbox_status
  AND e.lease_fence OPERATOR(pg_catalog.=) $2
)sql";

// An event's status, for the error when outbox_published matched nothing
// (never its lease fence: an error shows no fence but the caller's own),
// and its scope, which outbox_published checks before it compares
// anything: $1 id.
extern const char outbox_event_state[] = R"sql(
SELECT e.status::pg_catalog.text, e.scope
FROM idem.outbox_event e
WHERE e.id OPERATOR(pg_catalog.=) $1
)sql";

// $1 the clock, $2 the lease, $3 event types (NULL: all), $4 the batch
// limit. An event is due when it is pending (or its lease ran out) and
// available, and no earlier event of its aggregate is pending or leased: an
// aggregate's events go out one at a time, in id order. SKIP LOCKED: two
// relays never wait for, or get, the same event. The status lists are
// written as = ANY of an array so that their operator is named (the same
// expression the partial indexes' IN lists parse to), and "the same
// aggregate_type, or both NULL" is spelt out with a named =, because IS NOT
// DISTINCT FROM has no form that names its operator: no name in the
// statement is left for a search_path to resolve.
//
// A relay leases only the events of scopes its role may use
// (idem.may_use_scope, the rule of src/policy/scope_owner.hpp): the filter
// is on the candidate, before LIMIT and FOR UPDATE, so another tenant's
// events are never locked, leased or counted against the batch. The
// aggregate's order (the NOT EXISTS) is kept among the events the relay may
// lease: aggregate ids are the tenants' own words, and another tenant's
// event under the same id, which this relay could never publish, must not
// hold this tenant's events back. Where no scope has an owner every scope
// passes and the order is 1.1's.
extern const char outbox_lease[] = R"sql(
WITH due AS (
  SELECT e.id AS due_id
  FROM idem.outbox_event e
  WHERE e.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::idem.outbox_status[])
    AND (e.status OPERATOR(pg_catalog.=) 'pending'
         OR e.leased_until OPERATOR(pg_catalog.<=) $1)
    AND e.available_at OPERATOR(pg_catalog.<=) $1
    AND ($3 IS NULL OR e.event_type OPERATOR(pg_catalog.=) ANY ($3))
    AND idem.may_use_scope(e.scope)
    AND NOT EXISTS (
      SELECT
      FROM idem.outbox_event p
      WHERE e.aggregate_id IS NOT NULL
        AND p.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::idem.outbox_status[])
        AND p.aggregate_id IS NOT NULL
        AND (p.aggregate_type OPERATOR(pg_catalog.=) e.aggregate_type
             OR p.aggregate_type IS NULL AND e.aggregate_type IS NULL)
        AND p.aggregate_id OPERATOR(pg_catalog.=) e.aggregate_id
        AND p.id OPERATOR(pg_catalog.<) e.id
        AND idem.may_use_scope(p.scope))
  ORDER BY e.id
  LIMIT $4
  FOR UPDATE OF e SKIP LOCKED)
UPDATE idem.outbox_event o
SET status = 'leased'::idem.outbox_status,
    lease_fence = pg_catalog.nextval('idem.outbox_lease_fence_seq'::pg_catalog.regclass),
    leased_until = $1 OPERATOR(pg_catalog.+) $2,
    attempt_count = o.attempt_count OPERATOR(pg_catalog.+) 1
FROM due
WHERE o.id OPERATOR(pg_catalog.=) due.due_id
RETURNING o.id, o.lease_fence, o.scope, o.key, o.event_type, o.aggregate_type,
          o.aggregate_id, o.payload, o.headers, o.attempt_count, o.delivery_key
)sql";

// The same without the filter, for a schema still at 1.1: no idem.scope_owner
// covers any scope.
extern const char outbox_lease_11[] = R"sql(
WITH due AS (
  SELECT e.id AS due_id
  FROM idem.outbox_event e
  WHERE e.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::idem.outbox_status[])
    AND (e.status OPERATOR(pg_catalog.=) 'pending'
         OR e.leased_until OPERATOR(pg_catalog.<=) $1)
    AND e.available_at OPERATOR(pg_catalog.<=) $1
    AND ($3 IS NULL OR e.event_type OPERATOR(pg_catalog.=) ANY ($3))
    AND NOT EXISTS (
      SELECT
      FROM idem.outbox_event p
      WHERE e.aggregate_id IS NOT NULL
        AND p.status OPERATOR(pg_catalog.=) ANY ('{pending,leased}'::idem.outbox_status[])
        AND p.aggregate_id IS NOT NULL
        AND (p.aggregate_type OPERATOR(pg_catalog.=) e.aggregate_type
             OR p.aggregate_type IS NULL AND e.aggregate_type IS NULL)
        AND p.aggregate_id OPERATOR(pg_catalog.=) e.aggregate_id
        AND p.id OPERATOR(pg_catalog.<) e.id)
  ORDER BY e.id
  LIMIT $4
  FOR UPDATE OF e SKIP LOCKED)
UPDATE idem.outbox_event o
SET status = 'leased'::idem.outbox_status,
    lease_fence = pg_catalog.nextval('idem.outbox_lease_fence_seq'::pg_catalog.regclass),
    leased_until = $1 OPERATOR(pg_catalog.+) $2,
    attempt_count = o.attempt_count OPERATOR(pg_catalog.+) 1
FROM due
WHERE o.id OPERATOR(pg_catalog.=) due.due_id
RETURNING o.id, o.lease_fence, o.scope, o.key, o.event_type, o.aggregate_type,
          o.aggregate_id, o.payload, o.headers, o.attempt_count, o.delivery_key
)sql";

}  // namespace idem::statement_sql
