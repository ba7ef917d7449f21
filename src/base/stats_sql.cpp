// The SQL functions over the counters of stats.hpp, behind the view
// idem.stats: idem.stats_counters() and idem.stats_reset().
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "base/stats.hpp"

namespace idem {

namespace {

// Columns of idem.stats_counters(): datid, the counters, last_worker_round,
// stats_reset. A database whose schema is older than the library (the new
// library installed, ALTER EXTENSION UPDATE not yet run) declares fewer
// counters: it gets its version's, the first ones in the same order (1.0's
// 15, 1.1's 26; 1.2 has 29, the last of them failed_rounds).
constexpr int columns_around_counters = 3;
constexpr int stats_columns = columns_around_counters + stats::counter_count;
constexpr int known_counter_counts[] = {stats::counters_of_1_0, stats::counters_of_1_1,
                                        stats::counter_count};

// The number of counters a declaration of `columns` columns holds, or -1.
int counters_declared(int columns) {
  for (int counters : known_counter_counts)
    if (columns == columns_around_counters + counters) return counters;
  return -1;
}

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

void put_row(ReturnSetInfo *result, int counters, stats::DatabaseCounters *row) {
  Datum values[stats_columns];
  bool nulls[stats_columns];
  int columns = columns_around_counters + counters;
  Oid datid = pg_atomic_read_u32(&row->datid);
  bool any_counted = false;
  values[0] = ObjectIdGetDatum(datid);
  nulls[0] = datid == InvalidOid;  // the overflow row
  for (int i = 0; i < stats::counter_count; ++i) {
    uint64 value = pg_atomic_read_u64(&row->counters[i]);
    any_counted = any_counted || value != 0;
    if (i >= counters) continue;
    values[1 + i] = Int64GetDatum(static_cast<int64>(value));
    nulls[1 + i] = false;
  }
  values[columns - 2] =
      timestamp_or_null(pg_atomic_read_u64(&row->last_worker_round), &nulls[columns - 2]);
  values[columns - 1] =
      timestamp_or_null(pg_atomic_read_u64(&row->stats_reset), &nulls[columns - 1]);
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
  int counters = counters_declared(result->setDesc->natts);
  if (counters < 0) {
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.stats_counters() is declared with the wrong columns"),
                    errdetail("it returns %d columns; the library fills %d, %d or %d",
                              result->setDesc->natts,
                              columns_around_counters + known_counter_counts[0],
                              columns_around_counters + known_counter_counts[1],
                              columns_around_counters + known_counter_counts[2]),
                    errhint("Reinstall the extension: the library and its SQL script disagree.")));
  }
  stats::row_for(MyDatabaseId);  // the current database shows, if only with zeros
  stats::for_each_row(
      [result, counters](stats::DatabaseCounters *row) { put_row(result, counters, row); });
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
