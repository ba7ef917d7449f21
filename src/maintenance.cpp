// purge_expired and sweep_stale: one bounded batch each, SKIP LOCKED, so
// maintenance never waits behind a live request.
#include "arguments.hpp"
#include "errors.hpp"
#include "keystore.hpp"
#include "statements.hpp"
#include "stats.hpp"

namespace idem {

namespace {

Datum run_batch(FunctionCallInfo fcinfo, Statement statement, stats::Counter rows_counter) {
  int32 limit = require_batch_limit(fcinfo, 0);
  Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
  if (SPI_connect() != SPI_OK_CONNECT) throw Error(sqlstate::internal, "SPI_connect failed");
  uint64 rows = execute_statement(statement, params, nullptr);
  SPI_finish();
  stats::count(rows_counter, rows);
  return Int64GetDatum(static_cast<int64>(rows));
}

}  // namespace

Datum purge_expired(FunctionCallInfo fcinfo) {
  return run_batch(fcinfo, Statement::purge_expired, stats::Counter::rows_purged);
}

Datum sweep_stale(FunctionCallInfo fcinfo) {
  return run_batch(fcinfo, Statement::sweep_stale, stats::Counter::rows_swept);
}

}  // namespace idem
