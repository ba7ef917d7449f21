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
#include "pg/citus.hpp"

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

// The relations a key stage maintains on this node (docs/internals.md, "On
// Citus"): the key table itself, except where it is a Citus table; there
// its shards on this node, each read and written by name (none on a node
// that holds none, the coordinator). A batch never reads row addresses in
// one relation and writes at them in another: each statement names one.
constexpr char key_table_name[] = "idem.idempotency_request";

constexpr char policy_table_name[] = "idem.scope_policy";

struct KeyRelations {
  Oid table;     // the key table (InvalidOid: missing, which its statements report)
  int count;
  Oid *relations;
  // The shard of the reference table idem.scope_policy on this node, read in
  // its place beside a key shard (a join of a shard with the reference
  // table itself is Citus's to plan, and it refuses one that writes by
  // ctid); InvalidOid where it is not a Citus table.
  Oid policy_shard;
};

KeyRelations key_relations(SpiSession *session) {
  using catalog_cache::IdemRelation;
  KeyRelations found = {catalog_cache::relation_oid(IdemRelation::key_table), 1, nullptr,
                        InvalidOid};
  if (!OidIsValid(found.table) || !citus::is_citus_table(IdemRelation::key_table)) {
    found.relations = static_cast<Oid *>(palloc(sizeof(Oid)));
    found.relations[0] = found.table;
    return found;
  }
  found.count = static_cast<int>(local_shards(session, found.table, &found.relations));
  Oid policy = catalog_cache::relation_oid(IdemRelation::scope_policy);
  Oid *policy_shards;
  if (OidIsValid(policy) && citus::is_citus_table(IdemRelation::scope_policy) &&
      local_shards(session, policy, &policy_shards) > 0)
    found.policy_shard = policy_shards[0];
  return found;
}

// A key statement on one of the relations: the kept plan for the table
// itself, else the statement read on the shard.
uint64 run_on(SpiSession *session, const KeyRelations &where, Oid relation, Statement statement,
              Datum *params) {
  if (relation == where.table) return spi_run(session, statement, params, nullptr);
  OnRelation names[2] = {{key_table_name, relation}, {policy_table_name, where.policy_shard}};
  return spi_run_on(session, statement, names, OidIsValid(where.policy_shard) ? 2 : 1, params,
                    nullptr);
}

// The purge: read the batch's ctids, then delete each row in place without
// waiting (table_tuple_delete with wait = false). A row that a live
// transaction holds or changed since the read is skipped, which is what
// SELECT ... FOR UPDATE SKIP LOCKED promised, without first writing a row
// lock and its WAL record for every row: one heap write per purged row
// instead of two. A row updated since the read (a claim took the key over)
// is another version; the one read is no longer deleted. Triggers, which this
// path would bypass, send the batch through a plain SQL DELETE instead.
uint64 purge_batch(SpiSession *session, Datum *params, bool in_scope, const KeyRelations &where,
                   Oid relation) {
  Relation rel;
  if (relation == where.table) {
    RangeVar *name = makeRangeVar(const_cast<char *>("idem"),
                                  const_cast<char *>("idempotency_request"), -1);
    rel = table_openrv(name, RowExclusiveLock);
  } else {
    rel = table_open(relation, RowExclusiveLock);
  }
  if (has_delete_triggers(rel)) {
    table_close(rel, NoLock);
    return run_on(session, where, relation,
                  in_scope ? Statement::purge_expired_in_scope : Statement::purge_expired, params);
  }
  uint64 found = run_on(session, where, relation,
                        in_scope ? Statement::purge_candidates_in_scope : Statement::purge_candidates,
                        params);
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
uint64 sweep_bound_batch(SpiSession *session, Datum *params, bool in_scope,
                         const KeyRelations &where, Oid relation) {
  uint64 found = run_on(session, where, relation,
                        in_scope ? Statement::sweep_stale_in_scope : Statement::sweep_stale, params);
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
  return run_on(session, where, relation, Statement::sweep_rows, rows);
}

// One key stage's batch on one relation, of at most `limit` rows (params[1]).
uint64 key_batch_on(SpiSession *session, Statement statement, Datum *params, bool in_scope,
                    const KeyRelations &where, Oid relation) {
  if (statement == Statement::purge_expired)
    return purge_batch(session, params, in_scope, where, relation);
  if (catalog_cache::key_table_has_binding())
    return sweep_bound_batch(session, params, in_scope, where, relation);
  return run_on(session, where, relation,
                in_scope ? Statement::sweep_stale_10_in_scope : Statement::sweep_stale_10, params);
}

// The batch over every relation of the key table on this node, in turn, up
// to `limit` rows in all: a batch comes back short only when every relation
// had less than its share, as on one table.
uint64 key_batch(SpiSession *session, Statement statement, Datum *params, bool in_scope,
                 int32 limit) {
  KeyRelations where = key_relations(session);
  uint64 total = 0;
  for (int i = 0; i < where.count && total < static_cast<uint64>(limit); ++i) {
    params[1] = Int32GetDatum(limit - static_cast<int32>(total));
    total += key_batch_on(session, statement, params, in_scope, where, where.relations[i]);
  }
  return total;
}

int compare_scopes(const ListCell *a, const ListCell *b) {
  return strcmp(static_cast<const char *>(lfirst(a)), static_cast<const char *>(lfirst(b)));
}

}  // namespace

uint64 local_shards(SpiSession *session, Oid table, Oid **shards) {
  Datum argument = ObjectIdGetDatum(table);
  uint64 found = spi_run(session, Statement::local_shards, &argument, nullptr);
  *shards = static_cast<Oid *>(palloc(sizeof(Oid) * (found == 0 ? 1 : found)));
  uint64 count = 0;
  for (uint64 i = 0; i < found; ++i) {
    bool isnull;
    Datum shard = spi_copy_datum(session, i, 1, &isnull);
    if (!isnull) (*shards)[count++] = DatumGetObjectId(shard);
  }
  return count;
}

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

// idem.purge_consumed's batch where the inbox is a Citus table: on each of
// its shards this node holds, up to `limit` rows in all.
uint64 purge_consumed_on_shards(SpiSession *session, Datum *params, int32 limit) {
  Oid *shards;
  uint64 count = local_shards(
      session, catalog_cache::relation_oid(catalog_cache::IdemRelation::consumed_message), &shards);
  uint64 total = 0;
  for (uint64 i = 0; i < count && total < static_cast<uint64>(limit); ++i) {
    params[1] = Int32GetDatum(limit - static_cast<int32>(total));
    OnRelation names[1] = {{"idem.consumed_message", shards[i]}};
    total += spi_run_on(session, Statement::purge_consumed_on_shard, names, 1, params, nullptr);
  }
  return total;
}

uint64 run_on_key_relations(SpiSession *session, Statement statement, Datum *params, int32 limit,
                            RelationRows take, void *context) {
  KeyRelations where = key_relations(session);
  uint64 total = 0;
  for (int i = 0; i < where.count && total < static_cast<uint64>(limit); ++i) {
    params[1] = Int32GetDatum(limit - static_cast<int32>(total));
    uint64 rows = run_on(session, where, where.relations[i], statement, params);
    if (take != nullptr) take(session, rows, context);
    total += rows;
  }
  return total;
}

uint64 run_maintenance_batch(SpiSession *session, Statement statement, int32 limit) {
  require_writable_for_maintenance(statement);
  // The sweep also ends the keys of bound sessions that ended (session_binding.hpp).
  Datum params[3] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit),
                     statement == Statement::sweep_stale ? session_binding::live_tokens_array()
                                                         : Datum(0)};
  if (statement == Statement::purge_expired || statement == Statement::sweep_stale)
    return key_batch(session, statement, params, false, limit);
  return spi_run(session, statement, params, nullptr);
}

uint64 run_maintenance_batch_in_scope(SpiSession *session, Statement statement, int32 limit,
                                      const char *scope) {
  Assert(statement == Statement::sweep_stale || statement == Statement::purge_expired);
  require_writable_for_maintenance(statement);
  Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
  Datum name = CStringGetTextDatum(scope);
  if (statement == Statement::purge_expired) {
    Datum params[3] = {now, Int32GetDatum(limit), name};
    return key_batch(session, statement, params, true, limit);
  }
  Datum params[4] = {now, Int32GetDatum(limit), session_binding::live_tokens_array(), name};
  return key_batch(session, statement, params, true, limit);
}

uint64 scopes_with_work(SpiSession *session, Statement statement, char ***scopes) {
  Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
  Statement scopes_statement =
      statement == Statement::sweep_stale ? Statement::scopes_to_sweep : Statement::scopes_to_purge;
  KeyRelations where = key_relations(session);
  // In the caller's context, as spi_copy_text's copies: SPI frees its own at spi_finish.
  List *names = NIL;
  for (int i = 0; i < where.count; ++i) {
    uint64 found = run_on(session, where, where.relations[i], scopes_statement, &now);
    MemoryContext previous = MemoryContextSwitchTo(session->caller_context);
    for (uint64 row = 0; row < found; ++row) names = lappend(names, spi_copy_text(session, row, 1));
    MemoryContextSwitchTo(previous);
  }
  // Shards list their scopes each, in the statement's order ("C"): merged,
  // without repeats, in that order again.
  if (where.count > 1) list_sort(names, compare_scopes);
  uint64 count = 0;
  *scopes = static_cast<char **>(MemoryContextAlloc(
      session->caller_context, sizeof(char *) * (names == NIL ? 1 : list_length(names))));
  ListCell *cell;
  foreach (cell, names) {
    char *scope = static_cast<char *>(lfirst(cell));
    if (count > 0 && strcmp((*scopes)[count - 1], scope) == 0) continue;
    (*scopes)[count++] = scope;
  }
  return count;
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
