// The handoff of keys to completers' own processes (completer_launch.hpp):
// the worker claims a key and registers its process in one transaction, so
// a key is claimed (its attempt counted) only when a process could be had;
// the process waits for `go` until that claim is committed (completer_run.hpp),
// then runs as the function's owner. The worker does not wait for it: it
// keeps the run in a slot of its own and goes on with its rounds; each
// round (and each wake of its main loop) looks at the slots, terminates a
// process past its deadline, and collects those that stopped. The deadline
// is the earlier of the key's lock and idem.completer_timeout after the
// start (a server setting, which a policy writer cannot raise); at most
// idem.completer_max_processes runs at once, of which at most
// completer_owner_limit() of one owner.
#include "worker/completer_launch.hpp"

#include "worker/completer_call.hpp"
#include "keys/maintenance.hpp"
#include "worker/completer_run.hpp"
#include "pg/guard.hpp"
#include "pg/spi_session.hpp"
#include "base/stats.hpp"
#include "worker/worker_settings.hpp"

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

constexpr int candidate_columns = 4;

struct DueKeys {
  Candidate *candidates;  // in the session's caller context
  int count;
  int room;
};
IDEM_LONGJMP_SAFE(DueKeys);

// One relation's due keys, appended (run_on_key_relations's RelationRows).
void take_due_keys(SpiSession *session, uint64 rows, void *context) {
  DueKeys *due = static_cast<DueKeys *>(context);
  if (due->count + static_cast<int>(rows) > due->room) {
    due->room = due->count + static_cast<int>(rows);
    due->candidates =
        static_cast<Candidate *>(repalloc(due->candidates, sizeof(Candidate) * due->room));
  }
  for (uint64 row = 0; row < rows; ++row) {
    Datum values[candidate_columns];
    bool nulls[candidate_columns];
    spi_copy_row(session, row, candidate_columns, values, nulls);
    due->candidates[due->count++] = Candidate{values[0], values[1], values[2],
                                              nulls[3] ? InvalidOid : DatumGetObjectId(values[3])};
  }
}

}  // namespace

int load_due_keys(SpiSession *session, int32 limit, Candidate **candidates) {
  // Sized by the keys found, not by the limit, which a call may set high.
  DueKeys due = {static_cast<Candidate *>(MemoryContextAlloc(session->caller_context,
                                                             sizeof(Candidate))),
                 0, 1};
  Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
  (void)run_on_key_relations(session, Statement::completer_candidates, params, limit,
                             take_due_keys, &due);
  *candidates = due.candidates;
  return due.count;
}

namespace {

// After a run's deadline, how long its process has to stop on its own
// statement timeout (set to the deadline) before the worker terminates it.
constexpr int64 termination_grace_ms = 1000;

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

// One completer process the worker started and has not collected yet. Its
// texts and handle live in runs_context, freed when it is collected.
struct Run {
  bool used;
  bool committed;  // its claim committed and `go` given
  bool terminated;
  dsm_segment *segment;
  BackgroundWorkerHandle *handle;
  Oid owner;
  Oid function;
  char *scope;
  char *key;
  int64 fence;
  TimestampTz started;
  TimestampTz locked_until;
};
IDEM_LONGJMP_SAFE(Run);

Run runs[max_completer_processes];
MemoryContext runs_context = nullptr;

CompleterRun *run_memory(const Run &run) {
  return static_cast<CompleterRun *>(dsm_segment_address(run.segment));
}

int runs_in_use(Oid owner) {
  int count = 0;
  for (const Run &run : runs)
    if (run.used && (!OidIsValid(owner) || run.owner == owner)) ++count;
  return count;
}

Run *free_run() {
  for (Run &run : runs)
    if (!run.used) return &run;
  return nullptr;
}

// Lets a run go: its segment detached, its copies freed. The process, if
// it still runs, must have been told to stop (or have stopped).
void release_run(Run *run) {
  if (run->segment != nullptr) dsm_detach(run->segment);
  if (run->handle != nullptr) pfree(run->handle);
  if (run->scope != nullptr) pfree(run->scope);
  if (run->key != nullptr) pfree(run->key);
  *run = Run{};
}

// The worker's exit: no completer goes on without the worker that watches
// it (one not yet given `go` would wait forever; one running would outlive
// its deadline).
void stop_all_runs(int, Datum) {
  for (Run &run : runs)
    if (run.used && run.handle != nullptr) TerminateBackgroundWorker(run.handle);
}

// The end of a run's time: the key's lock, or idem.completer_timeout after
// its start (the current value: a reload applies to runs under way too).
TimestampTz run_deadline(const Run &run) {
  TimestampTz limit =
      TimestampTzPlusMilliseconds(run.started, worker_settings.completer_timeout_ms);
  return Min(limit, run.locked_until);
}

// Fills a run's segment and registers its process; false when there was no
// segment or no background worker slot. Inside the claim's transaction.
bool register_run(Run *slot, const Candidate &candidate, const Ownership &ownership, Oid owner) {
  const char *scope = TextDatumGetCString(candidate.scope);
  const char *key = TextDatumGetCString(candidate.key);
  const char *recovery_point =
      ownership.recovery_point_null ? "" : TextDatumGetCString(ownership.recovery_point);
  Size scope_size = strlen(scope) + 1;
  Size key_size = strlen(key) + 1;
  Size size = sizeof(CompleterRun) + scope_size + key_size + strlen(recovery_point) + 1;
  dsm_segment *segment = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
  if (segment == nullptr) return false;
  dsm_pin_mapping(segment);  // outlives the transaction; detached when collected
  TimestampTz started = GetCurrentTimestamp();
  *slot = Run{true, false, false, segment, nullptr, owner, candidate.completer,
              MemoryContextStrdup(runs_context, scope), MemoryContextStrdup(runs_context, key),
              ownership.fence, started, ownership.locked_until};
  CompleterRun *run = run_memory(*slot);
  memset(run, 0, sizeof(CompleterRun));
  SpinLockInit(&run->mutex);
  run->phase = CompleterPhase::waiting;
  run->database = MyDatabaseId;
  run->owner = owner;
  run->function = candidate.completer;
  run->fence = ownership.fence;
  run->attempt_count = ownership.attempt_count;
  run->deadline = run_deadline(*slot);
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
  MemoryContext previous = MemoryContextSwitchTo(runs_context);
  bool registered = RegisterDynamicBackgroundWorker(&worker, &slot->handle);
  MemoryContextSwitchTo(previous);
  if (!registered) {
    slot->handle = nullptr;
    release_run(slot);
  }
  return registered;
}

// The slot being registered, for the error cleanup to stop: its claim is
// not committed, so its process must never get `go`.
Run *pending_run = nullptr;

// The worker's own claim, committed together with the registration of the
// completer's process: a key is claimed (its attempt counted) only when a
// process could be had, and the process waits for `go` until the claim is
// committed.
Launch claim_and_launch(MemoryContext round_context, const Candidate &candidate, Run *slot) {
  Ownership ownership = {false, 0, 0, Datum(0), true, 0};
  Ownership *claimed = &ownership;
  begin_transaction("idem: claiming a key for its completer");
  MemoryContext transaction_context = MemoryContextSwitchTo(round_context);
  run_guarded([&candidate, claimed]() -> Datum {
    Datum params[3] = {candidate.scope, candidate.key, candidate.request_hash};
    SpiSession session;
    spi_connect(&session);
    if (spi_run(&session, Statement::completer_claim, params, nullptr) == 1) {
      char *kind = spi_copy_text(&session, 0, 1);
      bool isnull;
      int64 fence = spi_int64(&session, 0, 2, &isnull);
      if (!isnull && strcmp(kind, "replay_success") != 0 && strcmp(kind, "final_failure") != 0 &&
          strcmp(kind, "processing_active") != 0) {
        claimed->owned = true;
        claimed->fence = fence;
        claimed->recovery_point = spi_copy_datum(&session, 0, 3, &isnull);
        claimed->recovery_point_null = isnull;
        claimed->attempt_count = DatumGetInt32(spi_copy_datum(&session, 0, 4, &isnull));
        claimed->locked_until = DatumGetTimestampTz(spi_copy_datum(&session, 0, 5, &isnull));
      }
    }
    spi_finish(&session);
    return Datum(0);
  });
  MemoryContextSwitchTo(transaction_context);
  if (!ownership.owned) {
    end_transaction();
    return Launch::not_owned;
  }
  Oid owner;
  const char *reason = why_not_runnable(candidate.completer, &owner);
  if (reason != nullptr) {
    warn_completer_not_runnable(candidate, owner, reason);
    end_transaction();  // the attempt counts: max_attempts bounds the tries
    return Launch::not_runnable;
  }
  // One owner's completers never take every process: the claim is undone
  // and the key waits, unclaimed, for a round where its owner has room.
  if (runs_in_use(owner) >= completer_owner_limit()) {
    PopActiveSnapshot();
    AbortCurrentTransaction();
    return Launch::owner_busy;
  }
  pending_run = slot;
  if (!register_run(slot, candidate, ownership, owner)) {
    pending_run = nullptr;
    // The claim is undone: the key waits for a round with a free slot.
    PopActiveSnapshot();
    AbortCurrentTransaction();
    return Launch::no_slot;
  }
  end_transaction();
  pending_run = nullptr;
  return Launch::launched;
}

void start_run(Run *slot) {
  CompleterRun *run = run_memory(*slot);
  SpinLockAcquire(&run->mutex);
  run->phase = CompleterPhase::go;
  PGPROC *process = run->process;
  SpinLockRelease(&run->mutex);
  slot->committed = true;
  if (process != nullptr) SetLatch(&process->procLatch);
}

CompleterResult run_result(const Run &slot) {
  CompleterRun *run = run_memory(slot);
  SpinLockAcquire(&run->mutex);
  CompleterPhase phase = run->phase;
  SpinLockRelease(&run->mutex);
  return phase == CompleterPhase::done ? run->result : CompleterResult::none;
}

// A process that stopped without a result: it could not connect, or was
// terminated (by the worker past its deadline, or by an operator).
void report_lost_run(const Run &run, const Candidate &candidate) {
  begin_transaction("idem: reporting a completer's run");
  const char *role = GetUserNameFromId(run.owner, true);
  bool by_lock = run.locked_until <= TimestampTzPlusMilliseconds(
                                         run.started, worker_settings.completer_timeout_ms);
  ereport(WARNING,
          (errmsg("idem completer %s for scope \"%s\", key \"%s\" ended without a result",
                  format_procedure(candidate.completer), run.scope, run.key),
           !run.terminated
               ? errdetail("Its process, connected as role \"%s\", stopped before it "
                           "reported; the server log says why.",
                           role != nullptr ? role : "?")
           : by_lock ? errdetail("It ran past the end of the key's lock and was terminated.")
                     : errdetail("It ran past idem.completer_timeout (%d ms) and was "
                                 "terminated.",
                                 worker_settings.completer_timeout_ms),
           errhint("The key stays claimed until its lock runs out, then a later round tries "
                   "again.")));
  end_transaction();
}

}  // namespace

void warn_completer_not_runnable(const Candidate &candidate, Oid owner, const char *reason) {
  ereport(WARNING,
          (errmsg("idem completer %s for scope \"%s\", key \"%s\" cannot be run",
                  OidIsValid(owner) ? format_procedure(candidate.completer)
                                    : psprintf("%u", candidate.completer),
                  TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
           errdetail_internal("%s", reason),
           errhint("Fix the completer of the scope in idem.scope_policy, or its owner; the key "
                   "stays claimed until its lock runs out, then a later round tries again.")));
}

Launch launch_completer(MemoryContext round_context, const Candidate &candidate) {
  static bool exit_callback_registered = false;
  if (!exit_callback_registered) {
    before_shmem_exit(stop_all_runs, Datum(0));
    exit_callback_registered = true;
  }
  if (runs_context == nullptr)
    runs_context =
        AllocSetContextCreate(TopMemoryContext, "idem completer runs", ALLOCSET_SMALL_SIZES);
  int most = Min(worker_settings.completer_max_processes, max_completer_processes);
  Run *slot = runs_in_use(InvalidOid) < most ? free_run() : nullptr;
  if (slot == nullptr) return Launch::all_busy;
  Launch launch = Launch::not_owned;
  // An error between the registration and the commit (the commit's own,
  // say): the process must not run a claim that is not there.
  PG_TRY();
  { launch = claim_and_launch(round_context, candidate, slot); }
  PG_CATCH();
  {
    if (pending_run != nullptr) {
      if (pending_run->handle != nullptr) TerminateBackgroundWorker(pending_run->handle);
      release_run(pending_run);
      pending_run = nullptr;
    }
    PG_RE_THROW();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(round_context);
  // Counted as it starts, so a run the worker's exit cuts short counts.
  if (launch == Launch::launched || launch == Launch::not_runnable)
    stats::count(stats::Counter::completer_runs);
  if (launch == Launch::launched) start_run(slot);
  return launch;
}

int64 watch_completers() {
  TimestampTz now = GetCurrentTimestamp();
  int64 next_ms = -1;
  for (Run &run : runs) {
    if (!run.used || !run.committed || run.terminated) continue;
    pid_t pid;
    if (GetBackgroundWorkerPid(run.handle, &pid) == BGWH_STOPPED) continue;
    TimestampTz stop_at = TimestampTzPlusMilliseconds(run_deadline(run), termination_grace_ms);
    if (now >= stop_at) {
      TerminateBackgroundWorker(run.handle);
      run.terminated = true;
      continue;
    }
    int64 ms = (stop_at - now + 999) / 1000;
    if (next_ms < 0 || ms < next_ms) next_ms = ms;
  }
  return next_ms;
}

bool collect_completer(MemoryContext round_context, FinishedRun *finished) {
  (void)watch_completers();
  for (Run &run : runs) {
    if (!run.used || !run.committed) continue;
    pid_t pid;
    BgwHandleStatus status = GetBackgroundWorkerPid(run.handle, &pid);
    if (status == BGWH_POSTMASTER_DIED) proc_exit(1);
    if (status != BGWH_STOPPED) continue;
    MemoryContextSwitchTo(round_context);
    CompleterResult result = run_result(run);
    finished->candidate = Candidate{CStringGetTextDatum(run.scope), CStringGetTextDatum(run.key),
                                    Datum(0), run.function};
    finished->fence = run.fence;
    finished->returned = result == CompleterResult::returned;
    // Reported before its slot is let go: an error here leaves the run to
    // be collected (and reported) by the next round.
    if (result == CompleterResult::none) report_lost_run(run, finished->candidate);
    MemoryContextSwitchTo(round_context);
    release_run(&run);
    return true;
  }
  return false;
}

}  // namespace idem
