// The handoff of one key to the completer's own process (completer_launch.hpp):
// the worker claims the key and registers the process in one transaction, so
// a key is claimed (its attempt counted) only when a process could be had;
// the process waits for `go` until that claim is committed (completer_run.hpp),
// then runs as the function's owner while the worker waits, until the key's
// lock ends and a grace period after it.
#include "policy/completer_launch.hpp"

#include "policy/completer_call.hpp"
#include "policy/completer_run.hpp"
#include "pg/guard.hpp"
#include "pg/spi_session.hpp"
#include "keys/stats.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
}

namespace idem {

namespace {

// After the key's lock ends, how long the completer's process has to stop
// on its own statement timeout (set to the lock's end) before the worker
// terminates it.
constexpr int64 termination_grace_ms = 1000;

// The longest single wait on the latch (WaitLatch narrows its timeout to
// int); longer waits are a loop of these.
constexpr int64 longest_wait_ms = 60000;

// What the worker's claim granted.
struct Ownership {
  bool owned;
  int64 fence;
  int32 attempt_count;
  Datum recovery_point;
  bool recovery_point_null;
  TimestampTz locked_until;
};
IDEM_LONGJMP_SAFE(Ownership);

// Why the owner's process could not run the completer, or nullptr; inside
// a transaction. *owner is the function's owner when it exists.
const char *why_not_runnable(Oid function, Oid *owner) {
  if (const char *reason = completer_not_runnable(function, owner)) return reason;
  const char *role = GetUserNameFromId(*owner, false);
  HeapTuple authid = SearchSysCache1(AUTHOID, ObjectIdGetDatum(*owner));
  bool may_log_in = HeapTupleIsValid(authid) &&
                    reinterpret_cast<Form_pg_authid>(GETSTRUCT(authid))->rolcanlogin;
  if (HeapTupleIsValid(authid)) ReleaseSysCache(authid);
  if (compat::owner_needs_login && !may_log_in)
    return psprintf("Its owner, role \"%s\", may not log in: the completer runs in a process "
                    "connected as its owner, and on this PostgreSQL major that role needs LOGIN.",
                    role);
  if (!superuser_arg(*owner) && !compat::may_connect(MyDatabaseId, *owner))
    return psprintf("Its owner, role \"%s\", may not connect to this database.", role);
  return nullptr;
}

// The run being started or waited for, for the error cleanup to stop.
struct ActiveRun {
  dsm_segment *segment;
  BackgroundWorkerHandle *handle;
};
ActiveRun active_run = {nullptr, nullptr};

CompleterRun *active_run_memory() {
  return static_cast<CompleterRun *>(dsm_segment_address(active_run.segment));
}

// An error or the worker's exit while a run is registered: the completer
// must not go on without the worker (it would wait for `go` forever, or run
// past a claim that was never committed).
void stop_active_run() {
  if (active_run.handle != nullptr) TerminateBackgroundWorker(active_run.handle);
  if (active_run.segment != nullptr) dsm_detach(active_run.segment);
  active_run = ActiveRun{nullptr, nullptr};
}

// Registered once per process rather than around each run (as
// PG_ENSURE_ERROR_CLEANUP would): the claim inside a run may register exit
// callbacks of its own (session_binding.cpp), which a per-run callback's
// cancellation would then find in its way.
void stop_active_run_at_exit(int, Datum) { stop_active_run(); }

// Fills a run's segment and registers its process; false when there was no
// segment or no background worker slot. Inside the claim's transaction.
bool register_run(MemoryContext round_context, const Candidate &candidate,
                  const Ownership &ownership, Oid owner) {
  const char *scope = TextDatumGetCString(candidate.scope);
  const char *key = TextDatumGetCString(candidate.key);
  const char *recovery_point =
      ownership.recovery_point_null ? "" : TextDatumGetCString(ownership.recovery_point);
  Size scope_size = strlen(scope) + 1;
  Size key_size = strlen(key) + 1;
  Size size = sizeof(CompleterRun) + scope_size + key_size + strlen(recovery_point) + 1;
  dsm_segment *segment = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
  if (segment == nullptr) return false;
  dsm_pin_mapping(segment);  // outlives the transaction; detached by the worker
  active_run.segment = segment;
  CompleterRun *run = active_run_memory();
  memset(run, 0, sizeof(CompleterRun));
  SpinLockInit(&run->mutex);
  run->phase = CompleterPhase::waiting;
  run->database = MyDatabaseId;
  run->owner = owner;
  run->function = candidate.completer;
  run->fence = ownership.fence;
  run->attempt_count = ownership.attempt_count;
  run->locked_until = ownership.locked_until;
  run->recovery_point_null = ownership.recovery_point_null;
  run->scope_offset = sizeof(CompleterRun);
  run->key_offset = static_cast<uint32>(run->scope_offset + scope_size);
  run->recovery_point_offset = static_cast<uint32>(run->key_offset + key_size);
  strcpy(completer_run_text(run, run->scope_offset), scope);
  strcpy(completer_run_text(run, run->key_offset), key);
  strcpy(completer_run_text(run, run->recovery_point_offset), recovery_point);
  run->result = CompleterResult::none;

  BackgroundWorker worker;
  memset(&worker, 0, sizeof worker);
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  worker.bgw_restart_time = BGW_NEVER_RESTART;
  strlcpy(worker.bgw_library_name, "idem", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "idem_completer_main", BGW_MAXLEN);
  strlcpy(worker.bgw_name, "idem completer", BGW_MAXLEN);
  strlcpy(worker.bgw_type, "idem completer", BGW_MAXLEN);
  worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(segment));
  worker.bgw_notify_pid = MyProcPid;  // its start and exit set this latch
  MemoryContext previous = MemoryContextSwitchTo(round_context);
  bool registered = RegisterDynamicBackgroundWorker(&worker, &active_run.handle);
  MemoryContextSwitchTo(previous);
  if (!registered) {
    active_run.handle = nullptr;
    dsm_detach(segment);
    active_run.segment = nullptr;
  }
  return registered;
}

enum class Launch { not_owned, not_runnable, no_slot, launched };

// The worker's own claim, committed together with the registration of the
// completer's process: a key is claimed (its attempt counted) only when a
// process could be had, and the process waits for `go` until the claim is
// committed.
Launch claim_and_launch(MemoryContext round_context, const Candidate &candidate,
                        Ownership *ownership) {
  begin_transaction("idem: claiming a key for its completer");
  MemoryContext transaction_context = MemoryContextSwitchTo(round_context);
  run_guarded([&candidate, ownership]() -> Datum {
    Datum params[3] = {candidate.scope, candidate.key, candidate.request_hash};
    SpiSession session;
    spi_connect(&session);
    *ownership = Ownership{false, 0, 0, Datum(0), true, 0};
    if (spi_run(&session, Statement::completer_claim, params, nullptr) == 1) {
      char *kind = spi_copy_text(&session, 0, 1);
      bool isnull;
      int64 fence = spi_int64(&session, 0, 2, &isnull);
      if (!isnull && strcmp(kind, "replay_success") != 0 && strcmp(kind, "final_failure") != 0 &&
          strcmp(kind, "processing_active") != 0) {
        ownership->owned = true;
        ownership->fence = fence;
        ownership->recovery_point = spi_copy_datum(&session, 0, 3, &isnull);
        ownership->recovery_point_null = isnull;
        ownership->attempt_count = DatumGetInt32(spi_copy_datum(&session, 0, 4, &isnull));
        ownership->locked_until = DatumGetTimestampTz(spi_copy_datum(&session, 0, 5, &isnull));
      }
    }
    spi_finish(&session);
    return Datum(0);
  });
  MemoryContextSwitchTo(transaction_context);
  if (!ownership->owned) {
    end_transaction();
    return Launch::not_owned;
  }
  Oid owner;
  const char *reason = why_not_runnable(candidate.completer, &owner);
  if (reason != nullptr) {
    ereport(WARNING,
            (errmsg("idem completer %s for scope \"%s\", key \"%s\" cannot be run",
                    OidIsValid(owner) ? format_procedure(candidate.completer)
                                      : psprintf("%u", candidate.completer),
                    TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
             errdetail_internal("%s", reason),
             errhint("Fix the completer of the scope in idem.scope_policy, or its owner; the key "
                     "stays claimed until its lock runs out, then a later round tries again.")));
    end_transaction();  // the attempt counts: max_attempts bounds the tries
    return Launch::not_runnable;
  }
  if (!register_run(round_context, candidate, *ownership, owner)) {
    // The claim is undone: the key waits for a round with a free slot.
    PopActiveSnapshot();
    AbortCurrentTransaction();
    return Launch::no_slot;
  }
  end_transaction();
  return Launch::launched;
}

void start_run() {
  CompleterRun *run = active_run_memory();
  SpinLockAcquire(&run->mutex);
  run->phase = CompleterPhase::go;
  PGPROC *process = run->process;
  SpinLockRelease(&run->mutex);
  if (process != nullptr) SetLatch(&process->procLatch);
}

// Waits for the completer's process to stop; terminates it when the key's
// lock ended a grace period ago (its own statement timeout, at the lock's
// end, should have stopped it). Times in int64 microseconds, each wait at
// most longest_wait_ms: a lock of any length (30 days) is waited for whole.
// Returns whether it had to terminate the process.
bool wait_for_run(TimestampTz locked_until) {
  TimestampTz deadline = TimestampTzPlusMilliseconds(locked_until, termination_grace_ms);
  bool terminated = false;
  for (;;) {
    pid_t pid;
    BgwHandleStatus status = GetBackgroundWorkerPid(active_run.handle, &pid);
    if (status == BGWH_STOPPED) return terminated;
    if (status == BGWH_POSTMASTER_DIED) proc_exit(1);
    TimestampTz now = GetCurrentTimestamp();
    if (!terminated && now >= deadline) {
      TerminateBackgroundWorker(active_run.handle);
      terminated = true;
    }
    int64 wait_ms = terminated ? longest_wait_ms : (deadline - now + 999) / 1000;
    wait_ms = Max(Min(wait_ms, longest_wait_ms), 1);
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                    static_cast<long>(wait_ms), PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();  // SIGTERM: stop_active_run_at_exit terminates the completer
    if (ConfigReloadPending) {  // as the worker's loop does between rounds
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
  }
}

CompleterResult run_result(Oid *owner) {
  CompleterRun *run = active_run_memory();
  SpinLockAcquire(&run->mutex);
  CompleterPhase phase = run->phase;
  SpinLockRelease(&run->mutex);
  *owner = run->owner;
  return phase == CompleterPhase::done ? run->result : CompleterResult::none;
}

// A process that stopped without a result: it could not connect, or was
// terminated (by the worker at the lock's end, or by an operator).
void report_lost_run(const Candidate &candidate, Oid owner, bool terminated) {
  begin_transaction("idem: reporting a completer's run");
  const char *role = GetUserNameFromId(owner, true);
  ereport(WARNING,
          (errmsg("idem completer %s for scope \"%s\", key \"%s\" ended without a result",
                  format_procedure(candidate.completer), TextDatumGetCString(candidate.scope),
                  TextDatumGetCString(candidate.key)),
           terminated ? errdetail("It ran past the end of the key's lock and was terminated.")
                      : errdetail("Its process, connected as role \"%s\", stopped before it "
                                  "reported; the server log says why.",
                                  role != nullptr ? role : "?"),
           errhint("The key stays claimed until its lock runs out, then a later round tries "
                   "again.")));
  end_transaction();
}

}  // namespace

// Statics keep what the PG_TRY block sets, so no local needs to be volatile.
Handoff hand_off(MemoryContext round_context, const Candidate &candidate, int64 *fence) {
  static Ownership ownership;
  static Launch launch;
  static CompleterResult result;
  static bool terminated;
  static Oid owner;
  result = CompleterResult::none;
  terminated = false;
  owner = InvalidOid;
  static bool exit_callback_registered = false;
  if (!exit_callback_registered) {
    before_shmem_exit(stop_active_run_at_exit, Datum(0));
    exit_callback_registered = true;
  }
  PG_TRY();
  {
    launch = claim_and_launch(round_context, candidate, &ownership);
    // Counted as it starts, so a run the worker's exit cuts short counts.
    if (launch == Launch::launched || launch == Launch::not_runnable)
      stats::count(stats::Counter::completer_runs);
    if (launch == Launch::launched) {
      start_run();
      terminated = wait_for_run(ownership.locked_until);
      result = run_result(&owner);
    }
  }
  PG_CATCH();
  {
    stop_active_run();
    PG_RE_THROW();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(round_context);
  if (launch == Launch::launched) {
    dsm_detach(active_run.segment);
    active_run = ActiveRun{nullptr, nullptr};
  }
  switch (launch) {
    case Launch::not_owned:
      return Handoff::not_owned;
    case Launch::no_slot:
      return Handoff::no_slot;
    case Launch::not_runnable:
      return Handoff::failed;
    case Launch::launched:
      break;
  }
  if (result == CompleterResult::none) report_lost_run(candidate, owner, terminated);
  MemoryContextSwitchTo(round_context);
  *fence = ownership.fence;
  return result == CompleterResult::returned ? Handoff::returned : Handoff::failed;
}

}  // namespace idem
