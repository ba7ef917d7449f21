// The completers of idem.run_maintenance (src/worker/run_maintenance.cpp):
// the worker's policy step (completer.hpp) inside one SQL call, in the
// caller's transaction. There is no process of the owner's to run a
// completer in, so each runs in a subtransaction of its own under the
// owner's identity as a security-restricted operation (as VACUUM and
// REFRESH MATERIALIZED VIEW run a table owner's code): SET ROLE, RESET ROLE,
// SET SESSION AUTHORIZATION and temporary tables are refused inside it,
// every setting it changed is put back when it returns, and an object it
// left in the session's temporary schema undoes its run. A completer that
// raises is logged with scope and key and undone alone.
#pragma once

#include "pg/pg.hpp"
#include "pg/spi_session.hpp"
#include "worker/completer.hpp"

namespace idem {

// Keys past max_attempts, in at most max_batches batches of `limit`; then at
// most `limit` due keys, each claimed by the caller's transaction and handed
// to its completer. Adds to *totals; sets totals->full_batch when a stage
// stopped at its bound. Does nothing where idem.scope_policy does not exist.
// With `session` connected, inside a SECURITY DEFINER function.
void run_completers_in_call(SpiSession *session, int32 limit, int max_batches,
                            CompleterTotals *totals);

// Whether a completer runs in this backend now: inside
// idem.run_maintenance's call of it, or anywhere in a completer's own
// process (mark_completer_process, called once as it starts). A completer
// may not start maintenance of its own (run_maintenance.cpp): it would
// claim and run other scopes' keys from inside a tenant's run.
bool completer_is_running();
void mark_completer_process();

// Why a completer cannot run as its owner wherever it runs (the function or
// its owner is gone, or the owner may not execute it), or nullptr; *owner is
// the function's owner when it exists. Inside a transaction. The worker adds
// its checks about connecting as the owner (completer_launch.cpp).
const char *completer_not_runnable(Oid function, Oid *owner);

}  // namespace idem
