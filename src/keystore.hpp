// The key-store operations behind the SQL functions. Each runs inside
// run_guarded() and keeps only trivially destructible locals (guard.hpp).
#pragma once

#include "pg.hpp"

namespace idem {

Datum claim_idempotency_key(FunctionCallInfo fcinfo);
Datum mark_succeeded(FunctionCallInfo fcinfo);
Datum mark_failed(FunctionCallInfo fcinfo);
Datum set_recovery_point(FunctionCallInfo fcinfo);
Datum purge_expired(FunctionCallInfo fcinfo);
Datum sweep_stale(FunctionCallInfo fcinfo);

}  // namespace idem
