// The completers of one idem.run_maintenance call (completer_call.hpp). The
// statements are the worker's (policy_statements.def); what differs is where
// the completer runs: here, in the caller's backend, as its owner, in a
// subtransaction, instead of in a process connected as its owner.
//
// Error handling: the claim and the checks raise as any statement would (the
// call fails, as the worker's round does). The completer itself runs under
// PG_TRY inside its subtransaction: its error, whatever its SQLSTATE, is
// copied, the subtransaction rolled back (which also restores the user, the
// security context and the settings), and the error logged as a WARNING
// with scope and key and counted; the call goes on. Only a cancel of the
// whole call (pg_cancel_backend, the call's statement_timeout) ends it.
// Each run has a time limit, idem.completer_timeout (a server setting): a
// cancel, repeated while it runs on, then FATAL (see "the time limit").
//
// A completer may not call idem.run_maintenance() itself
// (completer_is_running): the nested call would run other scopes'
// completers inside this one's run.
#include "worker/completer_call.hpp"

#include "keys/maintenance.hpp"
#include "pg/catalog_cache.hpp"
#include "worker/completer_launch.hpp"
#include "policy/scope_owner.hpp"
#include "base/stats.hpp"
#include "worker/worker_settings.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "utils/regproc.h"
#include "storage/latch.h"
#include "utils/resowner.h"
#include "utils/timeout.h"
}

namespace idem {

namespace {

// What the call's claim of a key granted.
struct CallOwnership {
  bool owned;
  int64 fence;
  int32 attempt_count;
  Datum recovery_point;
  bool recovery_point_null;
};
IDEM_LONGJMP_SAFE(CallOwnership);

uint64 exhaust_attempts(SpiSession *session, int32 limit, int max_batches, bool *more) {
  uint64 total = 0;
  for (int batch = 0; batch < max_batches; ++batch) {
    Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
    uint64 rows = run_on_key_relations(session, Statement::exhaust_attempts, params, limit);
    total += rows;
    if (rows < static_cast<uint64>(limit)) return total;
  }
  *more = true;
  return total;
}

// The claim a client's retry would make (completer_claim): exactly one of
// this call and a late retry owns the key.
CallOwnership claim(SpiSession *session, const Candidate &candidate) {
  CallOwnership ownership = {false, 0, 0, Datum(0), true};
  Datum params[3] = {candidate.scope, candidate.key, candidate.request_hash};
  // As the worker claims: its role is the bootstrap superuser (scope_owner.hpp).
  judge_as(BOOTSTRAP_SUPERUSERID);
  uint64 rows = spi_run(session, Statement::completer_claim, params, nullptr);
  judge_end();
  if (rows != 1) return ownership;
  char *kind = spi_copy_text(session, 0, 1);
  bool isnull;
  int64 fence = spi_int64(session, 0, 2, &isnull);
  if (isnull || strcmp(kind, "replay_success") == 0 || strcmp(kind, "final_failure") == 0 ||
      strcmp(kind, "processing_active") == 0)
    return ownership;
  ownership.owned = true;
  ownership.fence = fence;
  ownership.recovery_point = spi_copy_datum(session, 0, 3, &ownership.recovery_point_null);
  ownership.attempt_count = DatumGetInt32(spi_copy_datum(session, 0, 4, &isnull));
  return ownership;
}


char *temp_objects(SpiSession *session) {
  (void)spi_run(session, Statement::session_temp_objects, nullptr, nullptr);
  char *objects = spi_copy_text(session, 0, 1);
  return objects != nullptr ? objects : pstrdup("");
}

// Calls the completer by OID, as completer_worker.cpp does: through fmgr
// (a void LANGUAGE sql function returns a null), with the default collation.
void call_completer(Oid function, const Candidate &candidate, const CallOwnership &ownership) {
  FmgrInfo *flinfo = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo)));
  fmgr_info(function, flinfo);
  // A STRICT completer is not called with a null recovery point, as SQL
  // would not call it; it recorded nothing, which the call reports.
  if (flinfo->fn_strict && ownership.recovery_point_null) return;
  FunctionCallInfo call = static_cast<FunctionCallInfo>(palloc0(SizeForFunctionCallInfo(5)));
  InitFunctionCallInfoData(*call, flinfo, 5, DEFAULT_COLLATION_OID, nullptr, nullptr);
  call->args[0] = NullableDatum{candidate.scope, false};
  call->args[1] = NullableDatum{candidate.key, false};
  call->args[2] = NullableDatum{Int64GetDatum(ownership.fence), false};
  call->args[3] = NullableDatum{ownership.recovery_point, ownership.recovery_point_null};
  call->args[4] = NullableDatum{Int32GetDatum(ownership.attempt_count), false};
  (void)FunctionCallInvoke(call);
}

// Inside the completer's subtransaction: the call as the owner, a
// security-restricted operation, with its own level of settings, undone
// whether it commits or not (as index builds do for a table owner's
// functions). Any error leaves the restoring to the subtransaction's abort
// (which also pops the judgement: scope_owner.hpp).
void run_as_owner(Oid owner, Oid function, const Candidate &candidate,
                  const CallOwnership &ownership) {
  Oid caller;
  int security_context;
  GetUserIdAndSecContext(&caller, &security_context);
  SetUserIdAndSecContext(owner, security_context | SECURITY_LOCAL_USERID_CHANGE |
                                    SECURITY_RESTRICTED_OPERATION);
  int settings_level = NewGUCNestLevel();
  // The completer's calls are judged as its owner's, as in its own process.
  judge_as(owner);
  call_completer(function, candidate, ownership);
  judge_end();
  AtEOXact_GUC(false, settings_level);
  SetUserIdAndSecContext(caller, security_context);
}

// ---- the time limit of one completer run (idem.completer_timeout) ----
//
// A timeout of the backend's own (registered once) cancels the completer
// when its time is up, as statement_timeout would, and again every
// cancel_repeat_ms while it goes on: a completer that catches the cancel
// (EXCEPTION WHEN query_canceled) is cancelled again at its next
// CHECK_FOR_INTERRUPTS. One that still runs stop_grace_ms after its limit
// ends the session (as pg_terminate_backend would: FATAL, which no handler
// catches), the only stop a completer cannot refuse; the call's transaction
// rolls back with it. docs/policy.md, "Time limits", says so.
constexpr int cancel_repeat_ms = 100;
constexpr int stop_grace_ms = 2000;

TimeoutId completer_timeout = MAX_TIMEOUTS;  // not registered yet
volatile sig_atomic_t completer_over_time = false;
volatile sig_atomic_t completer_cancels = 0;

// The timeout's handler (in the SIGALRM handler): raise the flags a cancel
// or a terminate would, for CHECK_FOR_INTERRUPTS to act on.
void completer_time_up() {
  completer_over_time = true;
  completer_cancels = completer_cancels + 1;
  if (completer_cancels > stop_grace_ms / cancel_repeat_ms)
    ProcDiePending = true;
  else
    QueryCancelPending = true;
  InterruptPending = true;
  SetLatch(MyLatch);
}

// Which completer runs, for the CONTEXT of whatever it raises (the FATAL
// of a completer that would not stop included).
struct RunLabel {
  const char *function;
  const char *scope;
  const char *key;
};
IDEM_LONGJMP_SAFE(RunLabel);

void completer_error_context(void *argument) {
  const RunLabel *label = static_cast<const RunLabel *>(argument);
  errcontext("idem completer %s for scope \"%s\", key \"%s\", run by idem.run_maintenance()%s",
             label->function, label->scope, label->key,
             completer_over_time ? ", past idem.completer_timeout" : "");
}

void arm_time_limit() {
  if (completer_timeout == MAX_TIMEOUTS)
    completer_timeout = RegisterTimeout(USER_TIMEOUT, completer_time_up);
  completer_over_time = false;
  completer_cancels = 0;
  TimestampTz limit =
      TimestampTzPlusMilliseconds(GetCurrentTimestamp(), worker_settings.completer_timeout_ms);
  enable_timeout_every(completer_timeout, limit, cancel_repeat_ms);
}

// After the run, returned or raised: a cancel of ours that is still
// pending must not strike the call's next statement.
void disarm_time_limit() {
  if (completer_timeout == MAX_TIMEOUTS) return;  // never armed
  disable_timeout(completer_timeout, false);
  if (completer_over_time) QueryCancelPending = false;
}

// Whether the call's own statement_timeout (armed when the run began) has
// passed: then the whole call ends, whatever the completer made of it.
bool statement_timeout_passed(bool armed, TimestampTz at) {
  return armed && GetCurrentTimestamp() >= at;
}

// A cancel of the whole call (pg_cancel_backend, the call's
// statement_timeout) ends it, as it would end the worker's round; what the
// completer raised itself, whatever its SQLSTATE (57014 included), and the
// cancel of its own time limit are its failures. Only the server raises a
// cancel from ProcessInterrupts: a RAISE names another function.
bool ends_the_call(const ErrorData *error) {
  return error->sqlerrcode == ERRCODE_QUERY_CANCELED && !completer_over_time &&
         error->funcname != nullptr && strcmp(error->funcname, "ProcessInterrupts") == 0;
}

// Set while a completer runs in this backend (here, or in its own process:
// completer_worker.cpp), so that it cannot start maintenance of its own.
bool completer_running = false;

enum class CallEnd { returned, raised };

// One completer in a subtransaction of its own. The locals PG_CATCH reads
// are set before PG_TRY and not changed in it, so none needs to be
// volatile; nothing is static, so a nested call cannot overwrite them.
CallEnd run_in_subtransaction(SpiSession *session, Oid owner, const Candidate &candidate,
                              const CallOwnership &ownership) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner resource_owner = CurrentResourceOwner;
  const char *before = temp_objects(session);
  RunLabel label = {format_procedure(candidate.completer), TextDatumGetCString(candidate.scope),
                    TextDatumGetCString(candidate.key)};
  ErrorContextCallback error_context = {error_context_stack, completer_error_context, &label};
  bool timeout_armed = get_timeout_active(STATEMENT_TIMEOUT);
  TimestampTz timeout_at = timeout_armed ? get_timeout_finish_time(STATEMENT_TIMEOUT) : 0;
  CallEnd end = CallEnd::returned;
  BeginInternalSubTransaction(nullptr);
  MemoryContextSwitchTo(context);
  PG_TRY();
  {
    completer_running = true;
    error_context_stack = &error_context;
    arm_time_limit();
    run_as_owner(owner, candidate.completer, candidate, ownership);
    disarm_time_limit();
    error_context_stack = error_context.previous;
    completer_running = false;
    // It caught the call's own statement timeout and went on: the call
    // ends all the same.
    if (statement_timeout_passed(timeout_armed, timeout_at))
      ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                      errmsg("canceling statement due to statement timeout")));
    const char *after = temp_objects(session);
    if (strcmp(before, after) != 0)
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("the completer left an object in the session's temporary schema"),
                      errdetail("Temporary objects before: \"%s\"; after: \"%s\".", before, after),
                      errhint("A completer run by idem.run_maintenance may not leave temporary "
                              "objects for the caller or the next completer.")));
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = resource_owner;
  }
  PG_CATCH();
  {
    disarm_time_limit();
    error_context_stack = error_context.previous;
    completer_running = false;
    MemoryContextSwitchTo(context);
    ErrorData *error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = resource_owner;
    // It raised something else after the call's statement timeout passed:
    // the call ends all the same, and says why.
    if (statement_timeout_passed(timeout_armed, timeout_at))
      ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                      errmsg("canceling statement due to statement timeout")));
    if (ends_the_call(error)) ReThrowError(error);
    bool over_time = completer_over_time;
    ereport(WARNING,
            (errcode(error->sqlerrcode),
             errmsg("idem completer %s for scope \"%s\", key \"%s\" failed: %s",
                    label.function, label.scope, label.key,
                    error->message),
             over_time ? errdetail("It ran past idem.completer_timeout (%d ms) and was "
                                   "cancelled; its work is undone, and the key stays claimed "
                                   "until its lock runs out, then a later round tries again.",
                                   worker_settings.completer_timeout_ms)
                       : errdetail("Its work is undone; the key stays claimed until its lock "
                                   "runs out, then a later round tries again.")));
    FreeErrorData(error);
    end = CallEnd::raised;
  }
  PG_END_TRY();
  return end;
}

bool outcome_recorded(SpiSession *session, const Candidate &candidate, int64 fence) {
  Datum params[2] = {candidate.scope, candidate.key};
  bool done = false;
  if (spi_run(session, Statement::key_fence_and_status, params, nullptr) == 1) {
    char *status = spi_copy_text(session, 0, key_status_column);
    bool isnull;
    char *failure_code = spi_copy_text(session, 0, key_failure_code_column);
    done = spi_int64(session, 0, key_fence_column, &isnull) == fence &&
           outcome_status(status, failure_code);
  }
  if (!done)
    ereport(LOG, (errmsg("idem completer %s recorded no outcome for scope \"%s\", key \"%s\"",
                         format_procedure(candidate.completer),
                         TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
                  errdetail("The key stays processing until its lock runs out; a later round "
                            "tries again.")));
  return done;
}

enum class KeyEnd { not_owned, succeeded, failed };

KeyEnd complete_one(SpiSession *session, const Candidate &candidate) {
  CallOwnership ownership = claim(session, candidate);
  if (!ownership.owned) return KeyEnd::not_owned;
  stats::count(stats::Counter::completer_runs);
  Oid owner;
  const char *reason = completer_not_runnable(candidate.completer, &owner);
  if (reason != nullptr) {
    warn_completer_not_runnable(candidate, owner, reason);
    return KeyEnd::failed;
  }
  if (run_in_subtransaction(session, owner, candidate, ownership) == CallEnd::raised)
    return KeyEnd::failed;
  return outcome_recorded(session, candidate, ownership.fence) ? KeyEnd::succeeded
                                                               : KeyEnd::failed;
}

}  // namespace

void run_completers_in_call(SpiSession *session, int32 limit, int max_batches,
                            CompleterTotals *totals) {
  if (!OidIsValid(catalog_cache::relation_oid(catalog_cache::IdemRelation::scope_policy)))
    return;  // a 1.0 schema: no policies
  totals->exhausted += exhaust_attempts(session, limit, max_batches, &totals->full_batch);
  Candidate *candidates = nullptr;
  int count = load_due_keys(session, limit, &candidates);
  if (count == limit) totals->full_batch = true;
  for (int i = 0; i < count; ++i) {
    CHECK_FOR_INTERRUPTS();
    KeyEnd end = complete_one(session, candidates[i]);
    if (end == KeyEnd::not_owned) continue;  // a client's retry (or the limit) came first
    totals->runs += 1;
    if (end == KeyEnd::succeeded) {
      totals->successes += 1;
      stats::count(stats::Counter::completer_successes);
    } else {
      totals->failures += 1;
      stats::count(stats::Counter::completer_failures);
    }
  }
}

bool completer_is_running() { return completer_running; }

void mark_completer_process() { completer_running = true; }

// Why the completer cannot run as its owner, or nullptr; *owner is the
// function's owner when it exists (completer_call.hpp).
const char *completer_not_runnable(Oid function, Oid *owner) {
  *owner = InvalidOid;
  HeapTuple proc = OidIsValid(function) ? SearchSysCache1(PROCOID, ObjectIdGetDatum(function))
                                        : nullptr;
  if (!HeapTupleIsValid(proc)) return "The function no longer exists.";
  *owner = reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc))->proowner;
  ReleaseSysCache(proc);
  const char *role = GetUserNameFromId(*owner, true);
  if (role == nullptr) return "Its owner no longer exists.";
  if (!compat::may_execute(function, *owner))
    return psprintf("Its owner, role \"%s\", may not execute it.", role);
  return nullptr;
}

}  // namespace idem
