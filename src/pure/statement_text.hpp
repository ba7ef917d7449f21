// The kept statements' names and SQL texts, without Postgres: the texts stand
// as the server runs them, one raw string literal per statement, in
//   src/keys/claim_statements.cpp    the claim's writes, for 1.1 and 1.0 tables
//   src/keys/key_statements.cpp      outcomes, purge, sweep, the operator's tools
//   src/policy/policy_statements.cpp scope policies, max_attempts, the completer
//   src/messages/message_statements.cpp  inbox and outbox
// src/pg/statements.cpp prepares them (argument types, expected SPI code);
// test/unit/statements_test.cpp checks every text against the search_path
// rule and against docs/kept-statements.sql, which prints them all
// (`make kept-statements` writes it again).
#pragma once

namespace idem {

enum class Statement {
  claim_insert,             // insert-or-nothing, after the claim's look found no row
  claim_take_over,          // stale lock or retryable failure: new owner
  claim_regenerate,         // finished and expired: a new generation
  mark_succeeded,
  mark_failed,
  set_recovery_point,
  key_fence_and_status,     // a key's fence and status: why a write matched no row
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
  // policy (src/policy/scope_policy.cpp, src/policy/completer.cpp)
  claim_give_up,           // a takeover past max_attempts: failed_final instead
  policy_load,             // every row of idem.scope_policy
  exhaust_attempts,        // the worker: keys past max_attempts end failed_final
  completer_candidates,    // the worker: abandoned keys due for their completer
  completer_claim,         // the worker's own claim of one of them
  session_temp_objects,    // run_maintenance: this session's temp objects, before and after a completer
  // inbox and outbox (src/messages/inbox.cpp, src/messages/outbox.cpp)
  inbox_insert,            // a new message, or an expired one renewed in place
  inbox_set_result,        // set_consumed_result on a live consumed message
  outbox_insert,           // outbox_put: a new event, or nothing on its identity
  outbox_existing,         // outbox_put after a conflict: the event and its payload
  outbox_published,        // the fenced mark
  outbox_event_state,      // an event's scope (checked first), and why a fenced mark matched nothing
  outbox_lease,            // due events for one relay, leased under new fences
  // clients (src/keys/outcome.cpp)
  stored_answer,           // a completed key as idem.claim, as its replays carry it
  release_key,             // the owner forgets its key (src/keys/release.cpp)
  // scopes owned by roles (src/policy/scope_owner.cpp)
  owner_load,              // every row of idem.scope_owner and the table's owner
  outbox_lease_11,         // outbox_lease for a schema still at 1.1 (no idem.may_use_scope)
  // a worker round whose batch failed goes on scope by scope (worker.cpp,
  // "one scope's failure"): the scopes with work for a stage, and the
  // stage's statements limited to one scope ($4 for the sweeps, $3 for the purges)
  scopes_to_sweep,
  scopes_to_purge,
  sweep_stale_in_scope,
  sweep_stale_10_in_scope,
  purge_expired_in_scope,
  purge_candidates_in_scope,
};

constexpr int statement_count = static_cast<int>(Statement::purge_candidates_in_scope) + 1;

struct StatementText {
  Statement statement;  // its index in statement_texts
  const char *name;     // the enumerator's name
  const char *sql;   // the text SPI_prepare receives
};

// Every statement, in Statement order.
extern const StatementText statement_texts[statement_count];

inline const StatementText &statement_text(Statement statement) {
  return statement_texts[static_cast<int>(statement)];
}

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

// Columns of Statement::key_fence_and_status.
enum KeyFenceColumn { key_fence_column = 1, key_status_column, key_failure_code_column };

}  // namespace idem
