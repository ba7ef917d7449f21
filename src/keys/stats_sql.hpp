// The SQL functions over the counters of stats.hpp. Each runs inside
// run_guarded() and keeps only trivially destructible locals (guard.hpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// idem.stats_counters(): one row per database that counted, then the
// overflow row; raises 55000 when idem was not preloaded.
Datum stats_counters(FunctionCallInfo fcinfo);

// idem.stats_reset(all_databases boolean).
Datum stats_reset(FunctionCallInfo fcinfo);

}  // namespace idem
