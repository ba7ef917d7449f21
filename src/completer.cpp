// The completer in the worker's round (completer.hpp). Each key takes three
// short transactions: the worker's claim (committed first, so the attempt
// counts and a late client retry sees processing_active, or wins the
// compare-and-swap and the worker skips the key), the completer's own
// transaction as the function's owner under a statement_timeout bounded by
// the key's lock, and a look at what it recorded.
#include "completer.hpp"

#include "guard.hpp"
#include "scope_policy.hpp"
#include "settings.hpp"
#include "spi_session.hpp"
#include "stats.hpp"

extern "C" {
#include "commands/extension.h"
#include "pgstat.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
}

namespace idem {

namespace {

constexpr int candidate_columns = 4;

// One due key, copied into the round's memory.
struct Candidate {
  Datum scope;
  Datum key;
  Datum request_hash;
  Oid completer;
};
IDEM_LONGJMP_SAFE(Candidate);

// What the worker's claim granted.
struct Ownership {
  bool owned;
  int64 fence;
  int32 attempt_count;
  Datum recovery_point;
  TimestampTz locked_until;
};
IDEM_LONGJMP_SAFE(Ownership);

// "idem completer f(...) for scope ..., key ...": the CONTEXT of the
// completer's errors, formatted before it runs, so the callback neither
// allocates much nor reads the catalogs while an error is being raised.
void completer_error_context(void *label) { errcontext("%s", static_cast<const char *>(label)); }

const char *completer_label(MemoryContext round_context, const Candidate &candidate) {
  MemoryContext previous = MemoryContextSwitchTo(round_context);
  const char *label = psprintf("idem completer %s for scope \"%s\", key \"%s\"",
                               format_procedure(candidate.completer),
                               TextDatumGetCString(candidate.scope),
                               TextDatumGetCString(candidate.key));
  MemoryContextSwitchTo(previous);
  return label;
}

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

bool policy_table_present() {
  return OidIsValid(get_extension_oid("idem", true)) && OidIsValid(scope_policy_table());
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
      uint64 changed = spi_run(&session, Statement::exhaust_attempts, params, nullptr);
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
  *out = static_cast<Candidate *>(palloc0(sizeof(Candidate) * limit));
  Candidate *candidates = *out;
  int count = DatumGetInt32(run_guarded([limit, candidates]() -> Datum {
    Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
    SpiSession session;
    spi_connect(&session);
    uint64 rows = spi_run(&session, Statement::completer_candidates, params, nullptr);
    for (uint64 row = 0; row < rows; ++row) {
      Datum values[candidate_columns];
      bool nulls[candidate_columns];
      spi_copy_row(&session, row, candidate_columns, values, nulls);
      candidates[row] = Candidate{values[0], values[1], values[2], DatumGetObjectId(values[3])};
    }
    spi_finish(&session);
    return Int32GetDatum(static_cast<int32>(rows));
  }));
  MemoryContextSwitchTo(transaction_context);
  end_transaction();
  return count;
}

// The worker's own claim, committed before the completer runs.
void claim_for_completer(MemoryContext round_context, const Candidate &candidate,
                         Ownership *ownership) {
  begin_transaction("idem: claiming a key for its completer");
  MemoryContext transaction_context = MemoryContextSwitchTo(round_context);
  run_guarded([&candidate, ownership]() -> Datum {
    Datum params[3] = {candidate.scope, candidate.key, candidate.request_hash};
    SpiSession session;
    spi_connect(&session);
    *ownership = Ownership{false, 0, 0, Datum(0), 0};
    if (spi_run(&session, Statement::completer_claim, params, nullptr) == 1) {
      char *kind = spi_copy_text(&session, 0, 1);
      bool isnull;
      int64 fence = spi_int64(&session, 0, 2, &isnull);
      if (!isnull && strcmp(kind, "replay_success") != 0 && strcmp(kind, "final_failure") != 0 &&
          strcmp(kind, "processing_active") != 0) {
        ownership->owned = true;
        ownership->fence = fence;
        ownership->recovery_point = spi_copy_datum(&session, 0, 3, &isnull);
        ownership->attempt_count = DatumGetInt32(spi_copy_datum(&session, 0, 4, &isnull));
        ownership->locked_until = DatumGetTimestampTz(spi_copy_datum(&session, 0, 5, &isnull));
      }
    }
    spi_finish(&session);
    return Datum(0);
  });
  MemoryContextSwitchTo(transaction_context);
  end_transaction();
}

// The completer's transaction, as the function's owner; false when it
// raised (the error is logged with its scope and key).
bool run_completer(MemoryContext round_context, const Candidate &candidate,
                   const Ownership &ownership) {
  begin_transaction("idem: running a completer");
  Oid owner = InvalidOid;
  HeapTuple proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(candidate.completer));
  if (HeapTupleIsValid(proc)) {
    owner = reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc))->proowner;
    ReleaseSysCache(proc);
  }
  if (!OidIsValid(owner) || !compat::may_execute(candidate.completer, owner)) {
    ereport(WARNING,
            (errmsg("idem completer %u of scope \"%s\" cannot be run", candidate.completer,
                    TextDatumGetCString(candidate.scope)),
             errdetail(OidIsValid(owner) ? "Its owner may not execute it."
                                         : "The function no longer exists."),
             errhint("Fix the completer of the scope in idem.scope_policy.")));
    end_transaction();
    return false;
  }
  // The lock the worker's claim took bounds the completer's time.
  long remaining_ms = static_cast<long>((ownership.locked_until - GetCurrentTimestamp()) / 1000);
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  const char *label = completer_label(round_context, candidate);
  ErrorContextCallback error_context = {error_context_stack, completer_error_context,
                                        const_cast<char *>(label)};
  error_context_stack = &error_context;
  volatile bool succeeded = true;  // set in PG_CATCH, read after it
  PG_TRY();
  {
    enable_timeout_after(STATEMENT_TIMEOUT, remaining_ms > 1 ? static_cast<int>(remaining_ms) : 1);
    SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE);
    (void)OidFunctionCall5(candidate.completer, candidate.scope, candidate.key,
                           Int64GetDatum(ownership.fence), ownership.recovery_point,
                           Int32GetDatum(ownership.attempt_count));
    SetUserIdAndSecContext(saved_user, saved_context);
    disable_timeout(STATEMENT_TIMEOUT, false);
    end_transaction();
  }
  PG_CATCH();
  {
    // Logged with the CONTEXT above, rolled back (which restores the user);
    // the key stays the worker's until its lock runs out.
    HOLD_INTERRUPTS();
    disable_timeout(STATEMENT_TIMEOUT, false);
    MemoryContextSwitchTo(round_context);
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    QueryCancelPending = false;
    RESUME_INTERRUPTS();
    succeeded = false;
  }
  PG_END_TRY();
  // Popped only here: PG_END_TRY restores the stack as PG_TRY found it.
  error_context_stack = error_context.previous;
  QueryCancelPending = false;  // a timeout that fired as the completer returned
  MemoryContextSwitchTo(round_context);
  return succeeded;
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
    if (spi_run(&session, Statement::completer_outcome, params, nullptr) == 1) {
      char *status = spi_copy_text(&session, 0, 1);
      bool isnull;
      done = spi_int64(&session, 0, 2, &isnull) == fence && strcmp(status, "processing") != 0;
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
    Ownership ownership;
    claim_for_completer(round_context, candidates[i], &ownership);
    MemoryContextSwitchTo(round_context);
    if (!ownership.owned) continue;  // a client's retry (or the limit) came first
    totals->runs += 1;
    stats::count(stats::Counter::completer_runs);
    bool ran = run_completer(round_context, candidates[i], ownership);
    if (ran && outcome_recorded(round_context, candidates[i], ownership.fence)) {
      totals->successes += 1;
      stats::count(stats::Counter::completer_successes);
    } else {
      totals->failures += 1;
      stats::count(stats::Counter::completer_failures);
    }
    MemoryContextSwitchTo(round_context);
  }
  MemoryContextSwitchTo(caller_context);
}

}  // namespace idem
