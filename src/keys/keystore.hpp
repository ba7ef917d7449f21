// The key-store operations behind the SQL functions. Each runs inside
// run_guarded() and keeps only trivially destructible locals (guard.hpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

Datum claim_idempotency_key(FunctionCallInfo fcinfo);
Datum mark_succeeded(FunctionCallInfo fcinfo);
Datum mark_failed(FunctionCallInfo fcinfo);
Datum set_recovery_point(FunctionCallInfo fcinfo);
Datum purge_expired(FunctionCallInfo fcinfo);
Datum sweep_stale(FunctionCallInfo fcinfo);
Datum claim_or_wait(FunctionCallInfo fcinfo);  // claim_or_wait.cpp
Datum extend_lock(FunctionCallInfo fcinfo);    // outcome.cpp
Datum mark_succeeded_returning(FunctionCallInfo fcinfo);  // marked_answer.cpp
Datum mark_failed_returning(FunctionCallInfo fcinfo);

}  // namespace idem
