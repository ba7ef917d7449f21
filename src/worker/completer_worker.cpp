// The completer's own process, modelled on pg_cron's
// cron.use_background_workers: a dynamic background worker connected as the
// function's owner, so the completer's whole transaction, commit included,
// runs as that role, and whatever it leaves in its session ends with the
// process instead of reaching the idem worker or another scope's completer.
// The process connects, runs the completer in one transaction, commits,
// reports to the idem worker (completer_run.hpp) and exits: everything the
// completer does (its commit, deferred triggers, ON COMMIT actions, session
// settings, temp objects, WITH HOLD cursors, SET ROLE) happens in a session of
// the owner's that ends with the run.
//
// Error handling: the transaction runs under PG_TRY; an error (the
// completer's, its commit's, the statement timeout's) is logged with the
// completer, scope and key, rolled back, and reported to the worker. SIGTERM
// (the worker's, a second past the run's deadline) and postmaster death end
// the process directly, as in any backend.
#include "pg/guard.hpp"
#include "worker/completer_call.hpp"
#include "worker/completer_run.hpp"

extern "C" {
#include "catalog/pg_collation.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/regproc.h"
#include "utils/timeout.h"
}

namespace idem {

namespace {

// Set once per process; statics, so that they survive the longjmp of an
// error inside the run without volatile locals.
CompleterRun *run = nullptr;
const char *label = nullptr;  // "idem completer f(...) for scope ..., key ..."
CompleterResult result = CompleterResult::none;

// Waits until the worker's claim is committed (go) or given up (skip).
CompleterPhase wait_for_go() {
  for (;;) {
    SpinLockAcquire(&run->mutex);
    run->process = MyProc;
    CompleterPhase phase = run->phase;
    SpinLockRelease(&run->mutex);
    if (phase != CompleterPhase::waiting) return phase;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
}

void report(CompleterResult outcome, const char *sqlstate, const char *message) {
  run->result = outcome;
  strlcpy(run->sqlstate, sqlstate, sizeof run->sqlstate);
  int length = pg_mbcliplen(message, static_cast<int>(strlen(message)),
                            static_cast<int>(sizeof run->message) - 1);
  memcpy(run->message, message, length);
  run->message[length] = '\0';
  SpinLockAcquire(&run->mutex);
  run->phase = CompleterPhase::done;
  SpinLockRelease(&run->mutex);
}

void completer_error_context(void *) { errcontext("%s", label); }

// Inside the transaction, as the owner: the function the worker checked is
// still there, still the owner's, and still executable by it.
bool still_runnable() {
  HeapTuple proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(run->function));
  Oid owner = InvalidOid;
  if (HeapTupleIsValid(proc)) {
    owner = reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc))->proowner;
    ReleaseSysCache(proc);
  }
  if (owner == run->owner && compat::may_execute(run->function, GetUserId())) return true;
  ereport(WARNING,
          (errmsg("%s was not run", label),
           errdetail("The function was dropped, changed owner, or its owner may no longer "
                     "execute it since the worker claimed the key."),
           errhint("Fix the completer of the scope in idem.scope_policy.")));
  return false;
}

// Calls the completer by OID. Through fmgr rather than OidFunctionCall5,
// which refuses a null result: a void function in LANGUAGE sql returns one.
// The default collation, as a call from SQL with text arguments would have.
void call_completer() {
  FmgrInfo *flinfo = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo)));
  fmgr_info(run->function, flinfo);
  FunctionCallInfo call = static_cast<FunctionCallInfo>(palloc0(SizeForFunctionCallInfo(5)));
  InitFunctionCallInfoData(*call, flinfo, 5, DEFAULT_COLLATION_OID, nullptr, nullptr);
  call->args[0].value = CStringGetTextDatum(completer_run_text(run, run->scope_offset));
  call->args[0].isnull = false;
  call->args[1].value = CStringGetTextDatum(completer_run_text(run, run->key_offset));
  call->args[1].isnull = false;
  call->args[2].value = Int64GetDatum(run->fence);
  call->args[2].isnull = false;
  call->args[3].isnull = run->recovery_point_null;
  call->args[3].value = run->recovery_point_null
                            ? Datum(0)
                            : CStringGetTextDatum(completer_run_text(run, run->recovery_point_offset));
  call->args[4].value = Int32GetDatum(run->attempt_count);
  call->args[4].isnull = false;
  // A STRICT completer is not called with a null recovery point, as SQL
  // would not call it; it recorded nothing, which the worker reports.
  if (flinfo->fn_strict && run->recovery_point_null) return;
  (void)FunctionCallInvoke(call);
}

// One transaction, commit included, as the owner; bounded by its deadline,
// the earlier of the worker's lock and idem.completer_timeout (a timestamp:
// no narrowing of a long lock to int milliseconds).
void run_transaction(MemoryContext process_context) {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  MemoryContext previous = MemoryContextSwitchTo(process_context);
  label = psprintf("idem completer %s for scope \"%s\", key \"%s\"",
                   format_procedure(run->function), completer_run_text(run, run->scope_offset),
                   completer_run_text(run, run->key_offset));
  MemoryContextSwitchTo(previous);
  pgstat_report_activity(STATE_RUNNING, label);
  if (!still_runnable()) {
    PopActiveSnapshot();
    CommitTransactionCommand();
    result = CompleterResult::not_run;
    report(result, "", "the completer was not run");
    return;
  }
  ErrorContextCallback error_context = {error_context_stack, completer_error_context, nullptr};
  error_context_stack = &error_context;
  PG_TRY();
  {
    enable_timeout_at(STATEMENT_TIMEOUT, run->deadline);
    call_completer();
    PopActiveSnapshot();
    CommitTransactionCommand();  // deferred triggers and ON COMMIT, as the owner
    disable_timeout(STATEMENT_TIMEOUT, false);
    result = CompleterResult::returned;
    report(result, "00000", "");
  }
  PG_CATCH();
  {
    HOLD_INTERRUPTS();
    disable_timeout(STATEMENT_TIMEOUT, false);
    MemoryContextSwitchTo(process_context);
    ErrorData *error = CopyErrorData();
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    QueryCancelPending = false;
    RESUME_INTERRUPTS();
    result = CompleterResult::raised;
    report(result, unpack_sql_state(error->sqlerrcode), error->message ? error->message : "");
  }
  PG_END_TRY();
  error_context_stack = error_context.previous;
  pgstat_report_activity(STATE_IDLE, nullptr);
}

void completer_main(Datum argument) {
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();
  mark_completer_process();  // no maintenance from inside the run
  // Mapped for the life of the process (no resource owner): the worker
  // keeps the segment until this process has stopped.
  dsm_segment *segment = dsm_attach(DatumGetUInt32(argument));
  if (segment == nullptr) return;  // the worker gave the run up before it started
  dsm_pin_mapping(segment);
  run = static_cast<CompleterRun *>(dsm_segment_address(segment));
  if (wait_for_go() != CompleterPhase::go) return;
  // On 15 a role that may not log in is refused here (FATAL): the worker
  // checks LOGIN before it claims, and reports a run that ends without a
  // result (compat.hpp).
  BackgroundWorkerInitializeConnectionByOid(run->database, run->owner,
                                            compat::completer_connection_flags());
  MemoryContext process_context =
      AllocSetContextCreate(TopMemoryContext, "idem completer", ALLOCSET_DEFAULT_SIZES);
  MemoryContextSwitchTo(process_context);
  run_transaction(process_context);
}

}  // namespace

}  // namespace idem

extern "C" {

// A completer's process (bgw_function_name, started by the worker; the
// argument is the run's dsm_handle). It returns after its one run.
IDEM_BGWORKER_MAIN(completer_main, idem::completer_main)

}  // extern "C"
