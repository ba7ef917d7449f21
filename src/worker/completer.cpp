// The completer in the worker's round (completer.hpp): which keys are due,
// and whether each one's completer recorded an outcome. Each key takes: the
// worker's claim, committed together with the registration of a process to
// run the completer (so the attempt counts, and a late client retry sees
// processing_active, or wins the compare-and-swap and the worker skips the
// key); the completer's own process, connected as the function's owner
// (completer_worker.cpp), which the worker starts and does not wait for
// (completer_launch.cpp watches it and ends it past its deadline); and, at a
// later round, once the process has stopped, a look at what it recorded. No
// code of the completer's ever runs in the worker's session.
#include "worker/completer.hpp"

#include "keys/maintenance.hpp"
#include "pg/catalog_cache.hpp"
#include "worker/completer_launch.hpp"
#include "pg/guard.hpp"
#include "policy/scope_policy.hpp"
#include "pg/spi_session.hpp"
#include "base/stats.hpp"
#include "worker/worker_settings.hpp"

extern "C" {
#include "commands/extension.h"
#include "pgstat.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
}

namespace idem {

void begin_transaction(const char *activity) {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  pgstat_report_activity(STATE_RUNNING, activity);
}

void end_transaction() {
  PopActiveSnapshot();
  CommitTransactionCommand();
}

namespace {

bool policy_table_present() {
  // scope_policy is missing from a 1.0 schema.
  return OidIsValid(get_extension_oid("idem", true)) &&
         OidIsValid(catalog_cache::relation_oid(catalog_cache::IdemRelation::scope_policy));
}

// Ends keys past their scope's max_attempts; returns how many, or -1 when
// there is no policy table.
int64 exhaust_attempts(int32 limit) {
  begin_transaction("idem: ending keys past max_attempts");
  int64 rows = -1;
  if (policy_table_present()) {
    rows = DatumGetInt64(run_guarded([limit]() -> Datum {
      Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
      SpiSession session;
      spi_connect(&session);
      uint64 changed = run_on_key_relations(&session, Statement::exhaust_attempts, params, limit);
      spi_finish(&session);
      return Int64GetDatum(static_cast<int64>(changed));
    }));
  }
  end_transaction();
  return rows;
}

// The due keys, oldest first, copied into round_context.
int load_candidates(MemoryContext round_context, int32 limit, Candidate **out) {
  begin_transaction("idem: finding keys for completers");
  MemoryContext transaction_context = MemoryContextSwitchTo(round_context);
  int count = DatumGetInt32(run_guarded([limit, out]() -> Datum {
    SpiSession session;
    spi_connect(&session);
    int rows = load_due_keys(&session, limit, out);
    spi_finish(&session);
    return Int32GetDatum(rows);
  }));
  MemoryContextSwitchTo(transaction_context);
  end_transaction();
  return count;
}

// True when the key carries an outcome recorded with the worker's fence.
bool outcome_recorded(MemoryContext round_context, const Candidate &candidate, int64 fence) {
  begin_transaction("idem: checking a completer's outcome");
  MemoryContext transaction_context = MemoryContextSwitchTo(round_context);
  bool recorded = DatumGetBool(run_guarded([&candidate, fence]() -> Datum {
    Datum params[2] = {candidate.scope, candidate.key};
    SpiSession session;
    spi_connect(&session);
    bool done = false;
    if (spi_run(&session, Statement::key_fence_and_status, params, nullptr) == 1) {
      char *status = spi_copy_text(&session, 0, key_status_column);
      bool isnull;
      char *failure_code = spi_copy_text(&session, 0, key_failure_code_column);
      done = spi_int64(&session, 0, key_fence_column, &isnull) == fence &&
             outcome_status(status, failure_code);
    }
    spi_finish(&session);
    return BoolGetDatum(done);
  }));
  MemoryContextSwitchTo(transaction_context);
  // Inside the transaction: format_procedure reads the catalogs.
  if (!recorded)
    ereport(LOG, (errmsg("idem completer %s recorded no outcome for scope \"%s\", key \"%s\"",
                         format_procedure(candidate.completer),
                         TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
                  errdetail("The key stays processing until its lock runs out; a later round "
                            "tries again.")));
  end_transaction();
  return recorded;
}

}  // namespace

void run_completer_round(CompleterTotals *totals) {
  // The worker's context after a commit is TopMemoryContext: keep the
  // round's copies in a context of their own, emptied at each round.
  static MemoryContext round_context = nullptr;
  if (round_context == nullptr)
    round_context =
        AllocSetContextCreate(TopMemoryContext, "idem completer round", ALLOCSET_DEFAULT_SIZES);
  MemoryContextReset(round_context);
  MemoryContext caller_context = MemoryContextSwitchTo(round_context);
  // First the runs that ended since the last round: judged by what they
  // recorded, and their processes' room freed for this round's keys.
  FinishedRun finished;
  while (collect_completer(round_context, &finished)) {
    bool recorded = finished.returned &&
                    outcome_recorded(round_context, finished.candidate, finished.fence);
    MemoryContextSwitchTo(round_context);
    if (recorded) {
      totals->successes += 1;
      stats::count(stats::Counter::completer_successes);
    } else {
      totals->failures += 1;
      stats::count(stats::Counter::completer_failures);
    }
  }
  int32 limit = worker_settings.batch_size;
  int64 exhausted = exhaust_attempts(limit);
  MemoryContextSwitchTo(round_context);
  if (exhausted < 0) {
    MemoryContextSwitchTo(caller_context);
    return;
  }
  totals->exhausted += static_cast<uint64>(exhausted);
  Candidate *candidates = nullptr;
  int count = load_candidates(round_context, limit, &candidates);
  totals->full_batch = count == limit;
  MemoryContextSwitchTo(round_context);
  for (int i = 0; i < count; ++i) {
    CHECK_FOR_INTERRUPTS();
    if (!worker_settings.enabled) break;
    Launch launch = launch_completer(round_context, candidates[i]);
    MemoryContextSwitchTo(round_context);
    if (launch == Launch::not_owned) continue;  // a client's retry (or the limit) came first
    if (launch == Launch::owner_busy) continue;  // the next key may be another owner's
    if (launch == Launch::all_busy) break;       // the rest wait, unclaimed, for a later round
    if (launch == Launch::no_slot) {
      // Once per round; this key and the rest wait, unclaimed, for the next.
      ereport(LOG, (errmsg("idem completer for scope \"%s\", key \"%s\" must wait: no "
                           "background worker slot is free",
                           TextDatumGetCString(candidates[i].scope),
                           TextDatumGetCString(candidates[i].key)),
                    errdetail("Each completer runs in a background worker of its own; %d keys "
                              "wait for the next round.", count - i),
                    errhint("Raise max_worker_processes.")));
      break;
    }
    totals->runs += 1;
    if (launch == Launch::not_runnable) {  // logged; its attempt counts
      totals->failures += 1;
      stats::count(stats::Counter::completer_failures);
    }
  }
  MemoryContextSwitchTo(caller_context);
}

}  // namespace idem
