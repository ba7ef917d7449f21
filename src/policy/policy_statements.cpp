// The statements of scope policies (src/policy/scope_policy.cpp, the claim's
// max_attempts in src/keys/claim.cpp) and of the worker's policy rounds
// (src/policy/completer.cpp), as the server runs them.
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

namespace idem::statement_sql {

// The takeover's compare-and-swap (claim_take_over, with its parameters),
// ending the key instead of granting it: the claim that would start attempt
// max_attempts + 1. Returns the row in ClaimColumn order.
extern const char claim_give_up[] = R"sql(
UPDATE idem.idempotency_request AS r
SET status = 'failed_final'::idem.idempotency_status,
    failure_code = 'too_many_attempts',
    failure_message = 'the key reached its scope''s max_attempts',
    locked_until = NULL,
    bound_session = NULL,
    finished_at = $5,
    updated_at = $5
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

extern const char policy_load[] = R"sql(
SELECT p.scope, p.lock_timeout, p.retention, p.keep_forever, p.max_attempts,
       p.bind_lock_to_session
FROM idem.scope_policy p
)sql";

// Every row of idem.scope_owner with the owner of the table itself (the
// extension's owner, who passes uncovered scopes under
// idem.require_scope_owner): $1 the table's OID. One row with a NULL prefix
// when the table is empty.
extern const char owner_load[] = R"sql(
SELECT c.relowner, o.scope_prefix, o.owner::pg_catalog.oid
FROM pg_catalog.pg_class c
LEFT JOIN idem.scope_owner o ON true
WHERE c.oid OPERATOR(pg_catalog.=) $1
)sql";

// Neither of the worker's next two statements has an index to read
// abandoned keys by (a swept key is failed_retryable, in no partial index),
// so each scans the key table; an uncorrelated EXISTS over the policies
// becomes a one-time filter that skips the scan when no scope sets the
// column (bench/README.md, "The worker's idle rounds").
//
// Abandoned keys (swept, or processing with the lock run out) that used up
// their scope's max_attempts: what the next claim would record, recorded by
// the worker ($1 now, $2 batch limit), so neither the sweeper nor the
// completer tries them again.
extern const char exhaust_attempts[] = R"sql(
WITH done AS (
  SELECT s.ctid AS tid
  FROM idem.idempotency_request s
  JOIN idem.scope_policy p ON p.scope OPERATOR(pg_catalog.=) s.scope
  WHERE (s.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
           AND s.locked_until OPERATOR(pg_catalog.<=) $1
         OR s.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
           AND s.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text)
    AND s.expires_at OPERATOR(pg_catalog.>) $1
    AND s.attempt_count OPERATOR(pg_catalog.>=) p.max_attempts
    AND EXISTS (SELECT FROM idem.scope_policy q WHERE q.max_attempts IS NOT NULL)
  LIMIT $2
  FOR UPDATE OF s SKIP LOCKED)
UPDATE idem.idempotency_request AS r
SET status = 'failed_final'::idem.idempotency_status,
    failure_code = 'too_many_attempts',
    failure_message = 'the key reached its scope''s max_attempts',
    locked_until = NULL,
    finished_at = $1,
    updated_at = $1
WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT done.tid FROM done))
)sql";

// Oldest first; "older than completer_delay" counts from the end of the
// lock, or from the sweep for a swept key. The completer is stored by its
// qualified name (the policy trigger wrote it; pg_upgrade carries no
// function OID), resolved here at each round: InvalidOid when no such
// function exists any more, which the round logs instead of running it.
extern const char completer_candidates[] = R"sql(
SELECT r.scope, r.key, r.request_hash,
       COALESCE(pg_catalog.to_regprocedure(p.completer)::pg_catalog.oid,
                '0'::pg_catalog.oid)
FROM idem.scope_policy p
JOIN idem.idempotency_request r ON r.scope OPERATOR(pg_catalog.=) p.scope
WHERE p.completer IS NOT NULL
  AND (r.status OPERATOR(pg_catalog.=) 'processing'::idem.idempotency_status
         AND r.locked_until OPERATOR(pg_catalog.<=) $1
       OR r.status OPERATOR(pg_catalog.=) 'failed_retryable'::idem.idempotency_status
         AND r.failure_code OPERATOR(pg_catalog.=) 'abandoned'::pg_catalog.text)
  AND r.expires_at OPERATOR(pg_catalog.>) $1
  AND EXISTS (SELECT FROM idem.scope_policy q WHERE q.completer IS NOT NULL)
  AND COALESCE(r.locked_until, r.updated_at)
      OPERATOR(pg_catalog.<=) ($1 OPERATOR(pg_catalog.-)
                               COALESCE(p.completer_delay, '0'::pg_catalog.interval))
ORDER BY COALESCE(r.locked_until, r.updated_at)
LIMIT $2
)sql";

// The worker claims as a client would (precedence, max_attempts, the
// compare-and-swap): exactly one of it and a late retry owns the key.
extern const char completer_claim[] = R"sql(
SELECT c.kind::pg_catalog.text, c.fence, c.recovery_point, c.attempt_count,
       c.locked_until
FROM idem.claim_idempotency_key($1, $2, $3, 'idem completer') c
)sql";

// Every object in this session's temporary schema, as one text: read before
// and after a completer that idem.run_maintenance runs in the caller's
// session (completer_call.cpp). A completer that left one behind (a function
// or type in pg_temp, which a security-restricted operation does not stop
// when the schema already exists) is undone.
extern const char session_temp_objects[] = R"sql(
WITH temp_object AS (
  SELECT pg_catalog.concat('pg_class ', c.oid) AS id FROM pg_catalog.pg_class c
  WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_proc ', p.oid) FROM pg_catalog.pg_proc p
  WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_type ', t.oid) FROM pg_catalog.pg_type t
  WHERE t.typnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_operator ', o.oid) FROM pg_catalog.pg_operator o
  WHERE o.oprnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_collation ', l.oid) FROM pg_catalog.pg_collation l
  WHERE l.collnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_conversion ', v.oid) FROM pg_catalog.pg_conversion v
  WHERE v.connamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_opfamily ', f.oid) FROM pg_catalog.pg_opfamily f
  WHERE f.opfnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_ts_config ', g.oid) FROM pg_catalog.pg_ts_config g
  WHERE g.cfgnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
  UNION ALL
  SELECT pg_catalog.concat('pg_ts_dict ', d.oid) FROM pg_catalog.pg_ts_dict d
  WHERE d.dictnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())
SELECT COALESCE(pg_catalog.string_agg(temp_object.id, ' ' ORDER BY temp_object.id), '')
FROM temp_object
)sql";

}  // namespace idem::statement_sql
