// Keeps a call with a NULL key from being delegated by Citus
// (docs/beyond-one-server.md, "A NULL key"). Citus 13 and 14 hash the
// distribution argument of a delegated call without checking it for NULL
// (function_call_delegation.c): `SELECT idem.claim_idempotency_key('s',
// NULL, 'h')` outside a transaction block, or a prepared statement with the
// key bound to NULL, crashes the backend, and the postmaster restarts every
// session of the server.
//
// Citus must come first in shared_preload_libraries, so idem's planner hook
// runs before Citus's planner. For a bare call of one of idem's functions
// (`SELECT f(...)` or `SELECT ... FROM f(...)`, the shapes Citus delegates)
// whose second argument, the one idem's calls are delegated by, is NULL
// once the planner's constant folding is applied, it replaces that argument
// by a volatile expression of the same NULL. Citus never delegates a call
// with a volatile argument: the call runs on the coordinator, as inside a
// transaction block, and answers with its own words (P4001 for a NULL key;
// NULL from stored_answer). Every other query goes to the next planner
// untouched.
//
// Installed only where Citus's library was loaded first (a server without
// Citus has no hook and pays nothing). Where it is not installed while the
// server preloads libraries, nothing can stop the crash before the library
// loads: idem.citus_null_key_guard (read-only) says whether it was, and
// idem.citus_distribute() delegates by default only where every node says on.
#pragma once

#include "pg/pg.hpp"

namespace idem::null_key_guard {

// Defines idem.citus_null_key_guard and installs the hook when Citus is
// loaded; called from _PG_init.
void install();

}  // namespace idem::null_key_guard
