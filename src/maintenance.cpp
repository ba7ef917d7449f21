// purge_expired and sweep_stale: one bounded batch each, skipping rows that
// live transactions hold, so maintenance never waits behind a live request.
#include "maintenance.hpp"

#include "arguments.hpp"
#include "backend_writes.hpp"
#include "errors.hpp"
#include "keystore.hpp"
#include "message_maintenance.hpp"
#include "session_binding.hpp"
#include "stats.hpp"

extern "C" {
#include "access/tableam.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "nodes/makefuncs.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace idem {

namespace {

bool has_delete_triggers(Relation rel) {
  const TriggerDesc *triggers = rel->trigdesc;
  return triggers != nullptr &&
         (triggers->trig_delete_before_row || triggers->trig_delete_after_row ||
          triggers->trig_delete_instead_row || triggers->trig_delete_before_statement ||
          triggers->trig_delete_after_statement);
}

// The purge: read the batch's ctids, then delete each row in place without
// waiting (table_tuple_delete with wait = false). A row that a live
// transaction holds or changed since the read is skipped, which is what
// SELECT ... FOR UPDATE SKIP LOCKED promised, without first writing a row
// lock and its WAL record for every row: one heap write per purged row
// instead of two. A row updated since the read (a claim took the key over)
// is another version; the one read is no longer deleted. Triggers, which this
// path would bypass, send the batch through a plain SQL DELETE instead.
uint64 purge_batch(SpiSession *session, Datum *params) {
  RangeVar *name = makeRangeVar(const_cast<char *>("idem"),
                                const_cast<char *>("idempotency_request"), -1);
  Relation rel = table_openrv(name, RowExclusiveLock);
  if (has_delete_triggers(rel)) {
    table_close(rel, NoLock);
    return spi_run(session, Statement::purge_expired, params, nullptr);
  }
  uint64 found = spi_run(session, Statement::purge_candidates, params, nullptr);
  CommandId command = GetCurrentCommandId(true);
  backend_writes::note();
  uint64 deleted = 0;
  for (uint64 i = 0; i < found; ++i) {
    ItemPointerData tid = spi_item_pointer(session, i, 1);
    TM_FailureData failure;
    TM_Result result = table_tuple_delete(rel, &tid, command, GetActiveSnapshot(),
                                          InvalidSnapshot, false, &failure, false);
    if (result == TM_Ok) deleted += 1;
  }
  table_close(rel, NoLock);
  // Like an SPI statement: what follows in this transaction sees the deletes.
  CommandCounterIncrement();
  return deleted;
}

}  // namespace

uint64 run_maintenance_batch(SpiSession *session, Statement statement, int32 limit) {
  // The sweep also ends the keys of bound sessions that ended (session_binding.hpp).
  Datum params[3] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit),
                     statement == Statement::sweep_stale ? session_binding::live_tokens_array()
                                                         : Datum(0)};
  if (statement == Statement::purge_expired) return purge_batch(session, params);
  if (is_message_purge(statement)) return run_message_purge_batch(session, statement, params);
  return spi_run(session, for_key_table(statement, key_table_has_binding()), params, nullptr);
}

namespace {

Datum run_batch(FunctionCallInfo fcinfo, Statement statement) {
  int32 limit = require_batch_limit(fcinfo, 0);
  SpiSession session;
  spi_connect(&session);
  uint64 rows = run_maintenance_batch(&session, statement, limit);
  spi_finish(&session);
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
