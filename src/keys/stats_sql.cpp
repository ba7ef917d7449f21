// The SQL functions over the counters of stats.hpp, behind the view
// idem.stats: idem.stats_counters() and idem.stats_reset().
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "keys/stats.hpp"

namespace idem {

namespace {

// Columns of idem.stats_counters(): datid, the counters, last_worker_round, stats_reset.
constexpr int stats_columns = 1 + stats::counter_count + 2;

void require_counters(const char *what) {
  if (!stats::available())
    ereport(ERROR, (errcode_of(sqlstate::not_preloaded),
                    errmsg("%s needs idem in shared_preload_libraries", what),
                    errdetail("The counters live in shared memory, which only a preloaded "
                              "library can allocate."),
                    errhint("Add 'idem' to shared_preload_libraries in postgresql.conf and "
                            "restart the server. The key-store functions work without it.")));
}

Datum timestamp_or_null(uint64 stored, bool *isnull) {
  *isnull = stored == 0;
  return TimestampTzGetDatum(static_cast<TimestampTz>(stored));
}

void put_row(ReturnSetInfo *result, stats::DatabaseCounters *row) {
  Datum values[stats_columns];
  bool nulls[stats_columns];
  Oid datid = pg_atomic_read_u32(&row->datid);
  bool any_counted = false;
  values[0] = ObjectIdGetDatum(datid);
  nulls[0] = datid == InvalidOid;  // the overflow row
  for (int i = 0; i < stats::counter_count; ++i) {
    uint64 value = pg_atomic_read_u64(&row->counters[i]);
    any_counted = any_counted || value != 0;
    values[1 + i] = Int64GetDatum(static_cast<int64>(value));
    nulls[1 + i] = false;
  }
  values[stats_columns - 2] =
      timestamp_or_null(pg_atomic_read_u64(&row->last_worker_round), &nulls[stats_columns - 2]);
  values[stats_columns - 1] =
      timestamp_or_null(pg_atomic_read_u64(&row->stats_reset), &nulls[stats_columns - 1]);
  // The overflow row appears only once a database past the limit counted something.
  if (datid == InvalidOid && !any_counted) return;
  tuplestore_putvalues(result->setResult, result->setDesc, values, nulls);
}

// idem.stats_counters(): one row per database that counted, then the
// overflow row; raises 55000 when idem was not preloaded.
Datum stats_counters(FunctionCallInfo fcinfo) {
  require_counters("idem.stats");
  InitMaterializedSRF(fcinfo, 0);
  auto *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  if (result->setDesc->natts != stats_columns) {
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.stats_counters() is declared with the wrong columns"),
                    errdetail("it returns %d columns; the library fills %d",
                              result->setDesc->natts, stats_columns),
                    errhint("Reinstall the extension: the library and its SQL script disagree.")));
  }
  stats::row_for(MyDatabaseId);  // the current database shows, if only with zeros
  stats::for_each_row([result](stats::DatabaseCounters *row) { put_row(result, row); });
  return (Datum)0;
}

// idem.stats_reset(all_databases boolean).
Datum stats_reset(FunctionCallInfo fcinfo) {
  require_counters("idem.stats_reset()");
  if (PG_ARGISNULL(0))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("all_databases must not be NULL"),
                    errhint("Pass false to reset this database's counters, true to reset every "
                            "database's.")));
  TimestampTz now = GetCurrentTimestamp();
  if (PG_GETARG_BOOL(0))
    stats::for_each_row([now](stats::DatabaseCounters *row) { stats::reset_row(row, now); });
  else
    stats::reset_row(stats::row_for(MyDatabaseId), now);
  PG_RETURN_VOID();
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(stats_counters, idem::stats_counters)
IDEM_SQL_FUNCTION(stats_reset, idem::stats_reset)

}  // extern "C"
