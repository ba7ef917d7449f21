// Every function Postgres calls by name: the SQL-callable functions (the
// AS 'MODULE_PATHNAME', 'idem_<name>' of the extension scripts) and the
// background workers' mains (bgw_function_name). Each is a thin extern "C"
// shim around one guard (guard.hpp explains the error boundary); the bodies
// live in the files named by the headers below. _PG_init is in module.cpp.
#include "keys/arguments.hpp"
#include "pg/guard.hpp"
#include "messages/inbox.hpp"
#include "keys/invariants.hpp"
#include "keys/key_tools.hpp"
#include "messages/message_invariants.hpp"
#include "messages/outbox.hpp"
#include "keys/keystore.hpp"
#include "policy/completer_worker.hpp"
#include "waits/request_durations.hpp"
#include "keys/request_hash.hpp"
#include "keys/statement_memo.hpp"
#include "policy/scope_policy.hpp"
#include "keys/stats_sql.hpp"
#include "worker/worker.hpp"
#include "worker/worker_status.hpp"

extern "C" {

// The key store (docs/design.md, "The contract in one page").
IDEM_SQL_FUNCTION(claim_idempotency_key, idem::claim_idempotency_key_once)
IDEM_SQL_FUNCTION(mark_succeeded, idem::mark_succeeded)
IDEM_SQL_FUNCTION(mark_failed, idem::mark_failed)
IDEM_SQL_FUNCTION(set_recovery_point, idem::set_recovery_point)
IDEM_SQL_FUNCTION(purge_expired, idem::purge_expired)
IDEM_SQL_FUNCTION(sweep_stale, idem::sweep_stale)
IDEM_SQL_FUNCTION(claim_or_wait, idem::claim_or_wait_once)
IDEM_SQL_FUNCTION(extend_lock, idem::extend_lock)
IDEM_SQL_FUNCTION(request_hash_jsonb, idem::request_hash_jsonb)
IDEM_SQL_FUNCTION(request_hash_bytea, idem::request_hash_bytea)
IDEM_SQL_FUNCTION(typical_duration, idem::typical_duration)
IDEM_SQL_FUNCTION(mark_succeeded_returning, idem::mark_succeeded_returning_once)
IDEM_SQL_FUNCTION(mark_failed_returning, idem::mark_failed_returning_once)
IDEM_SQL_FUNCTION(interval_is_positive, idem::interval_is_positive_sql)

// The inbox and the outbox (inbox.hpp, outbox.hpp).
IDEM_SQL_FUNCTION(consume_once, idem::consume_once)
IDEM_SQL_FUNCTION(set_consumed_result, idem::set_consumed_result)
IDEM_SQL_FUNCTION(outbox_put, idem::outbox_put)
IDEM_SQL_FUNCTION(outbox_lease, idem::outbox_lease)
IDEM_SQL_FUNCTION(outbox_published, idem::outbox_published)
IDEM_SQL_FUNCTION(consumed_message_invariants_hold, idem::consumed_message_invariants_hold)
IDEM_SQL_FUNCTION(outbox_event_invariants_hold, idem::outbox_event_invariants_hold)
IDEM_SQL_FUNCTION(consumed_message_row_invariants_hold, idem::consumed_message_row_invariants_hold)
IDEM_SQL_FUNCTION(outbox_event_row_invariants_hold, idem::outbox_event_row_invariants_hold)

// The key table's CHECK constraint (invariants.hpp).
IDEM_SQL_FUNCTION(request_invariants_hold, idem::request_invariants_hold)
IDEM_SQL_FUNCTION(request_row_invariants_hold, idem::request_row_invariants_hold)

// idem.scope_policy's statement trigger: drops every backend's policy cache.
IDEM_SQL_FUNCTION(scope_policy_changed, idem::scope_policy_changed)

// The operator's surface: counters, worker status, by-key tools.
IDEM_SQL_FUNCTION(stats_counters, idem::stats_counters)
IDEM_SQL_FUNCTION(stats_reset, idem::stats_reset)
IDEM_SQL_FUNCTION(worker_status, idem::worker_status)
IDEM_SQL_FUNCTION(lookup, idem::lookup_key)
IDEM_SQL_FUNCTION(evict, idem::evict_key)
IDEM_SQL_FUNCTION(force_expire, idem::force_expire_key)

// The background workers (worker.hpp). They never return normally: SIGTERM
// and postmaster death end the process inside the body. A completer's
// process (completer_worker.hpp) returns after its one run.
PGDLLEXPORT void idem_launcher_main(Datum argument);
PGDLLEXPORT void idem_worker_main(Datum argument);
PGDLLEXPORT void idem_completer_main(Datum argument);

void idem_launcher_main(Datum argument) {
  idem::run_guarded([argument]() -> Datum {
    idem::launcher_main(argument);
    return 0;
  });
}

void idem_worker_main(Datum argument) {
  idem::run_guarded([argument]() -> Datum {
    idem::worker_main(argument);
    return 0;
  });
}

void idem_completer_main(Datum argument) {
  idem::run_guarded([argument]() -> Datum {
    idem::completer_main(argument);
    return 0;
  });
}

}  // extern "C"
