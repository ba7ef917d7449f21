// Every SQL statement idem runs, prepared once per backend and kept
// (SPI_keepplan). They run only under search_path = pg_catalog, pg_temp
// (every SECURITY DEFINER function of idem and the worker pin it;
// spi_session.hpp): a kept plan is analysed again under the current path
// whenever it differs from the one it was planned under, so that pin, not
// the text, is what keeps a caller's operators out. Names are
// schema-qualified too, operators included, as defence in depth.
#pragma once

#include "pg/pg.hpp"
#include "pure/errors.hpp"

namespace idem {

enum class Statement {
  claim_insert,             // insert-or-nothing, after the claim's look found no row
  claim_take_over,          // stale lock or retryable failure: new owner
  claim_regenerate,         // finished and expired: a new generation
  mark_succeeded,
  mark_failed,
  set_recovery_point,
  owner_fence,              // why a completion matched no row
  purge_expired,            // a DELETE, for a key table with delete triggers
  purge_candidates,         // the oldest expired outcomes' ctids
  sweep_stale,              // locks a batch of stale candidates (maintenance.cpp)
  sweep_rows,               // marks the locked rows still stale, by ctid
  lookup_key,        // the operator's tools (key_tools.cpp)
  evict_key,
  force_expire_key,
  purge_consumed,    // inbox (message_maintenance.cpp): one batch of idem.purge_consumed
  purge_published,   // and of idem.purge_published
  extend_lock,       // an owner's longer lease (outcome.cpp)
  // The claim statements and the sweep for a key table still at 1.0 (no
  // bound_session column): the library is installed before ALTER EXTENSION
  // idem UPDATE runs, and claims must work in between.
  claim_insert_10,
  claim_take_over_10,
  claim_regenerate_10,
  sweep_stale_10,
  // ==== policy (src/policy/scope_policy.cpp, src/policy/completer.cpp) ====
  claim_give_up,           // a takeover past max_attempts: failed_final instead
  policy_load,             // every row of idem.scope_policy
  exhaust_attempts,        // the worker: keys past max_attempts end failed_final
  completer_candidates,    // the worker: abandoned keys due for their completer
  completer_claim,         // the worker's own claim of one of them
  completer_outcome,       // what the completer left: status and fence
  // ==== inbox (src/messages/inbox.cpp) ====
  inbox_insert,            // a new message, or an expired one renewed in place
  inbox_set_result,        // set_consumed_result on a live consumed message
  outbox_insert,           // outbox_put: a new event, or nothing on its identity
  outbox_existing,         // outbox_put after a conflict: the event and its payload
  outbox_published,        // the fenced mark
  outbox_event_state,      // why a fenced mark matched nothing
  outbox_lease,            // due events for one relay, leased under new fences
  // ==== clients (src/keys/marked_answer.cpp) ====
  stored_answer,           // a completed key as idem.claim, as its replays carry it
};

// Columns of the claim statements' result rows.
enum ClaimColumn {
  col_inserted = 1,
  col_status,
  col_same_hash,
  col_lock_expired,
  col_expired,
  col_fence,  // first column copied into idem.claim (after kind)
  col_attempt_count,
  col_recovery_point,
  col_response_code,
  col_response_body,
  col_result_ref_type,
  col_result_ref_id,
  col_failure_code,
  col_failure_message,
  col_locked_until,
  col_expires_at,  // last column copied into idem.claim
  col_bound_session,  // the session the owner bound the key to, or NULL
};

// Parameters shared by the claim statements.
enum ClaimParam {
  claim_scope,
  claim_key,
  claim_request_hash,
  claim_claimed_by,
  claim_now,
  claim_lock_timeout,
  claim_retention,  // NULL: never expires
  claim_seen_fence,
  claim_seen_status,
  claim_bound_session,  // this session's token when idem.bind_lock_to_session is on
  claim_dead_session,   // the dead session the observed row was bound to, or NULL
  claim_param_count,
};

// Whether idem.idempotency_request has 1.1's bound_session column (three
// catalog cache lookups), and the variant of a statement for that table.
bool key_table_has_binding();
Statement for_key_table(Statement statement, bool has_binding);

// A statement's kept plan and the SPI_OK_* code its execution must return.
struct KeptStatement {
  SPIPlanPtr plan;
  int expected_result;
};
IDEM_LONGJMP_SAFE(KeptStatement);

// Prepares the statement on its first use in this backend (SPI must be
// connected: spi_session.hpp runs it) and keeps the plan.
KeptStatement kept_statement(Statement statement);

// Raises the internal error for an SPI call that returned an unexpected
// code, with the caller as its LOCATION.
[[noreturn]] void raise_spi_failure(const char *what, int code,
                                    SourceLocation where = SourceLocation::here());

}  // namespace idem
