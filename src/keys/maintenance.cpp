// purge_expired and sweep_stale: one bounded batch each, skipping rows that
// live transactions hold, so maintenance never waits behind a live request.
#include "keys/maintenance.hpp"

#include "base/arguments.hpp"
#include "keys/backend_writes.hpp"
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "waits/session_binding.hpp"
#include "base/stats.hpp"
#include "pg/catalog_cache.hpp"

extern "C" {
#include "access/tableam.h"
#include "access/table.h"
#include "commands/trigger.h"
#include "nodes/makefuncs.h"
#include "miscadmin.h"
#include "utils/array.h"
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
uint64 purge_batch(SpiSession *session, Datum *params, bool in_scope) {
  RangeVar *name = makeRangeVar(const_cast<char *>("idem"),
                                const_cast<char *>("idempotency_request"), -1);
  Relation rel = table_openrv(name, RowExclusiveLock);
  if (has_delete_triggers(rel)) {
    table_close(rel, NoLock);
    return spi_run(session, in_scope ? Statement::purge_expired_in_scope : Statement::purge_expired,
                   params, nullptr);
  }
  uint64 found = spi_run(
      session, in_scope ? Statement::purge_candidates_in_scope : Statement::purge_candidates,
      params, nullptr);
  CommandId command = GetCurrentCommandId(true);
  backend_writes::note();
  uint64 deleted = 0;
  for (uint64 i = 0; i < found; ++i) {
    // A batch may be a million rows: a cancel or statement_timeout ends it
    // here, and the transaction's abort undoes the deletes made so far.
    CHECK_FOR_INTERRUPTS();
    ItemPointerData tid = spi_item_pointer(session, i, 1);
    TM_FailureData failure;
    TM_Result result = table_tuple_delete(rel, &tid, command, GetActiveSnapshot(),
                                          InvalidSnapshot, false, &failure, false);
    // The only lock on the row may be this transaction's own (a sweep in the
    // same transaction locked it, and its new version keeps the lock): SKIP
    // LOCKED does not skip a transaction's own locks, so neither does this.
    // Deleting with wait = true then waits for nobody.
    if (result == TM_BeingModified && TransactionIdIsCurrentTransactionId(failure.xmax))
      result = table_tuple_delete(rel, &tid, command, GetActiveSnapshot(), InvalidSnapshot, true,
                                  &failure, false);
    if (result == TM_Ok) deleted += 1;
  }
  table_close(rel, NoLock);
  // Like an SPI statement: what follows in this transaction sees the deletes.
  CommandCounterIncrement();
  return deleted;
}

// The sweep of a key table with bindings, where a key bound to a session is
// stale as soon as that session's token has left the registry
// (session_binding.hpp). Which tokens are live must be read after the row
// version it judges is fixed. A session registers its token before the
// claim that stores it in a row commits, and tokens are never reused; so a
// row version committed before the read names a token that is in the
// registry at the read exactly when its session still lives. Read before
// (the tokens first, then the statement's snapshot), a session that
// registered its first token and committed a bound claim in between looks
// ended, and its key is swept while its owner works. Reading the tokens
// after the snapshot is not enough either: in READ COMMITTED the FOR UPDATE
// that locks a candidate follows a concurrent update to the row's newest
// version, which may be a newer claim's, committed after any read made
// before the lock. So: lock the candidates first (the list read before only
// picks them: a token registered since makes a false candidate, never a
// missed one that matters, since a session ended since is swept next
// batch), read the registry with every candidate locked, and mark only the
// rows still stale then. The row locks keep each row as it was judged until
// this transaction ends.
uint64 sweep_bound_batch(SpiSession *session, Datum *params, bool in_scope) {
  uint64 found = spi_run(session, in_scope ? Statement::sweep_stale_in_scope : Statement::sweep_stale,
                         params, nullptr);
  if (found == 0) return 0;
  Datum *stale = static_cast<Datum *>(palloc(sizeof(Datum) * found));
  ItemPointerData *tids = static_cast<ItemPointerData *>(palloc(sizeof(ItemPointerData) * found));
  int count = 0;
  for (uint64 i = 0; i < found; ++i) {
    CHECK_FOR_INTERRUPTS();
    bool isnull;
    bool lock_ended = DatumGetBool(spi_copy_datum(session, i, 3, &isnull));  // NULL: false
    int64 bound = spi_int64(session, i, 2, &isnull);
    if (!lock_ended && (isnull || session_binding::registered(bound))) continue;
    tids[count] = spi_item_pointer(session, i, 1);
    stale[count] = PointerGetDatum(&tids[count]);
    count += 1;
  }
  if (count == 0) return 0;
  Datum rows[2] = {params[0], PointerGetDatum(construct_array(stale, count, TIDOID,
                                                              sizeof(ItemPointerData), false,
                                                              TYPALIGN_SHORT))};
  return spi_run(session, Statement::sweep_rows, rows, nullptr);
}

}  // namespace

// The in-place purge writes without the executor, so for it this is the
// only check; for the others it names the function instead of the statement.
void require_writable_for_maintenance(Statement statement) {
  const char *what = "idem maintenance";
  switch (statement) {
    case Statement::purge_expired: what = "idem.purge_expired()"; break;
    case Statement::sweep_stale: what = "idem.sweep_stale()"; break;
    case Statement::purge_consumed: what = "idem.purge_consumed()"; break;
    case Statement::purge_published: what = "idem.purge_published()"; break;
    default: break;
  }
  PreventCommandIfReadOnly(what);
  PreventCommandIfParallelMode(what);
  PreventCommandDuringRecovery(what);
}

uint64 run_maintenance_batch(SpiSession *session, Statement statement, int32 limit) {
  require_writable_for_maintenance(statement);
  // The sweep also ends the keys of bound sessions that ended (session_binding.hpp).
  Datum params[3] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit),
                     statement == Statement::sweep_stale ? session_binding::live_tokens_array()
                                                         : Datum(0)};
  if (statement == Statement::purge_expired) return purge_batch(session, params, false);
  bool has_binding = catalog_cache::key_table_has_binding();
  if (statement == Statement::sweep_stale && has_binding)
    return sweep_bound_batch(session, params, false);
  return spi_run(session, for_key_table(statement, has_binding), params, nullptr);
}

uint64 run_maintenance_batch_in_scope(SpiSession *session, Statement statement, int32 limit,
                                      const char *scope) {
  Assert(statement == Statement::sweep_stale || statement == Statement::purge_expired);
  require_writable_for_maintenance(statement);
  Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
  Datum name = CStringGetTextDatum(scope);
  if (statement == Statement::purge_expired) {
    Datum params[3] = {now, Int32GetDatum(limit), name};
    return purge_batch(session, params, true);
  }
  Datum params[4] = {now, Int32GetDatum(limit), session_binding::live_tokens_array(), name};
  if (catalog_cache::key_table_has_binding()) return sweep_bound_batch(session, params, true);
  return spi_run(session, Statement::sweep_stale_10_in_scope, params, nullptr);
}

uint64 scopes_with_work(SpiSession *session, Statement statement, char ***scopes) {
  Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
  uint64 found = spi_run(session, statement == Statement::sweep_stale ? Statement::scopes_to_sweep
                                                                       : Statement::scopes_to_purge,
                         &now, nullptr);
  // In the caller's context, as spi_copy_text's copies: SPI frees its own at spi_finish.
  *scopes = static_cast<char **>(
      MemoryContextAlloc(session->caller_context, sizeof(char *) * (found == 0 ? 1 : found)));
  for (uint64 i = 0; i < found; ++i) (*scopes)[i] = spi_copy_text(session, i, 1);
  return found;
}

void count_maintenance_rows(Statement statement, uint64 rows) {
  if (rows == 0) return;
  switch (statement) {
    case Statement::sweep_stale: stats::count(stats::Counter::rows_swept, rows); break;
    case Statement::purge_expired: stats::count(stats::Counter::rows_purged, rows); break;
    case Statement::purge_consumed: stats::count(stats::Counter::messages_purged, rows); break;
    case Statement::purge_published: stats::count(stats::Counter::events_purged, rows); break;
    default: break;
  }
}

namespace {

Datum run_batch(FunctionCallInfo fcinfo, Statement statement) {
  int32 limit = require_batch_limit(fcinfo, 0);
  SpiSession session;
  spi_connect(&session);
  uint64 rows = run_maintenance_batch(&session, statement, limit);
  spi_finish(&session);
  count_maintenance_rows(statement, rows);
  return Int64GetDatum(static_cast<int64>(rows));
}

Datum purge_expired(FunctionCallInfo fcinfo) { return run_batch(fcinfo, Statement::purge_expired); }

Datum sweep_stale(FunctionCallInfo fcinfo) { return run_batch(fcinfo, Statement::sweep_stale); }

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(purge_expired, idem::purge_expired)
IDEM_SQL_FUNCTION(sweep_stale, idem::sweep_stale)

}  // extern "C"
