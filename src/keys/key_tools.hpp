// The operator's by-key tools: idem.lookup, idem.evict, idem.force_expire.
// Each runs inside run_guarded() and keeps only trivially destructible locals
// (guard.hpp); each use is written to the server log with who asked.
#pragma once

#include "pg/pg.hpp"

namespace idem {

Datum lookup_key(FunctionCallInfo fcinfo);
Datum evict_key(FunctionCallInfo fcinfo);
Datum force_expire_key(FunctionCallInfo fcinfo);

}  // namespace idem
