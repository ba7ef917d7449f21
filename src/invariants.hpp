// idem.request_invariants_hold(): the function the key table's one CHECK
// constraint calls (row_invariants.hpp holds the rules).
#pragma once

#include "pg.hpp"

namespace idem {

// Returns true when every invariant holds; otherwise raises 23514 naming
// the first one the row breaks. Runs inside run_guarded().
Datum request_invariants_hold(FunctionCallInfo fcinfo);

}  // namespace idem
