// idem.request_invariants_hold(): the function the key table's one CHECK
// constraint calls (row_invariants.hpp holds the rules).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// Returns true when every invariant holds; otherwise raises 23514 naming
// the first one the row breaks. Runs inside run_guarded().
Datum request_invariants_hold(FunctionCallInfo fcinfo);

// The same rules over the whole row, idem.request_invariants_hold(
// idem.idempotency_request): what the CHECK constraint calls (row_check.hpp).
Datum request_row_invariants_hold(FunctionCallInfo fcinfo);

}  // namespace idem
