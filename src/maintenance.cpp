// purge_expired and sweep_stale: one bounded batch each, SKIP LOCKED, so
// maintenance never waits behind a live request.
#include "maintenance.hpp"

#include "arguments.hpp"
#include "errors.hpp"
#include "keystore.hpp"
#include "stats.hpp"

namespace idem {

uint64 run_maintenance_batch(Statement statement, int32 limit) {
  Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
  return execute_statement(statement, params, nullptr);
}

namespace {

Datum run_batch(FunctionCallInfo fcinfo, Statement statement) {
  int32 limit = require_batch_limit(fcinfo, 0);
  if (SPI_connect() != SPI_OK_CONNECT) throw Error(sqlstate::internal, "SPI_connect failed");
  uint64 rows = run_maintenance_batch(statement, limit);
  SPI_finish();
  return Int64GetDatum(static_cast<int64>(rows));
}

}  // namespace

// The worker's batches are counted once per round (stats::count_worker_round).
Datum purge_expired(FunctionCallInfo fcinfo) {
  Datum rows = run_batch(fcinfo, Statement::purge_expired);
  stats::count(stats::Counter::rows_purged, static_cast<uint64>(DatumGetInt64(rows)));
  return rows;
}

Datum sweep_stale(FunctionCallInfo fcinfo) {
  Datum rows = run_batch(fcinfo, Statement::sweep_stale);
  stats::count(stats::Counter::rows_swept, static_cast<uint64>(DatumGetInt64(rows)));
  return rows;
}

}  // namespace idem
