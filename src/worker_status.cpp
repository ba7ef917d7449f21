#include "worker_status.hpp"

#include "errors.hpp"
#include "guard.hpp"
#include "settings.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/tuplestore.h"
}

namespace idem {

namespace {

struct WorkerEntry {
  slock_t mutex;  // guards report; held only to copy a few fields
  WorkerReport report;
};

// Fixed size (max_worker_databases entries, a few KB): the count in use is
// set at start and never changes, since idem.database needs a restart.
struct WorkerSharedState {
  int database_count;
  WorkerEntry entries[max_worker_databases];
};

WorkerSharedState *shared = nullptr;  // set in every process by the startup hook

// Copied in the postmaster by request_worker_status_memory; children inherit it.
NameData configured_databases[max_worker_databases];
int configured_count = 0;

shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

const char *const state_names[] = {
    "stopped", "starting", "waiting for database", "waiting for extension", "standby",
    "binary upgrade", "disabled", "idle", "working",
};
static_assert(sizeof state_names / sizeof state_names[0] ==
                  static_cast<size_t>(WorkerState::working) + 1,
              "one name per WorkerState");

void request_memory() {
  if (previous_request_hook) previous_request_hook();
  RequestAddinShmemSpace(MAXALIGN(sizeof(WorkerSharedState)));
}

// Runs in the postmaster at start and after a crash restart (found is then
// false again: the memory is new), and in EXEC_BACKEND children (found true).
void attach_memory() {
  if (previous_startup_hook) previous_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  shared = static_cast<WorkerSharedState *>(
      ShmemInitStruct("idem worker status", sizeof(WorkerSharedState), &found));
  if (!found) {
    memset(shared, 0, sizeof(WorkerSharedState));
    shared->database_count = configured_count;
    for (int i = 0; i < configured_count; ++i) {
      WorkerEntry &entry = shared->entries[i];
      SpinLockInit(&entry.mutex);
      entry.report.database = configured_databases[i];
      entry.report.state = WorkerState::stopped;
    }
  }
  LWLockRelease(AddinShmemInitLock);
}

WorkerEntry &entry_at(int index) {
  Assert(shared != nullptr && index >= 0 && index < shared->database_count);
  return shared->entries[index];
}

}  // namespace

}  // namespace idem

// Hooks are called by Postgres: C linkage, each body behind the guard.
extern "C" {
static void idem_shmem_request(void) {
  idem::run_guarded([]() -> Datum {
    idem::request_memory();
    return 0;
  });
}
static void idem_shmem_startup(void) {
  idem::run_guarded([]() -> Datum {
    idem::attach_memory();
    return 0;
  });
}
}

namespace idem {

const char *worker_state_name(WorkerState state) {
  return state_names[static_cast<int>(state)];
}

void request_worker_status_memory(const char (*databases)[64], int count) {
  configured_count = count;
  for (int i = 0; i < count; ++i) namestrcpy(&configured_databases[i], databases[i]);
  previous_request_hook = shmem_request_hook;
  shmem_request_hook = idem_shmem_request;
  previous_startup_hook = shmem_startup_hook;
  shmem_startup_hook = idem_shmem_startup;
}

bool worker_status_attached() { return shared != nullptr; }

int worker_database_count() { return shared ? shared->database_count : 0; }

void read_worker_report(int index, WorkerReport *out) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  *out = entry.report;
  SpinLockRelease(&entry.mutex);
}

bool claim_worker_entry(int index, int pid) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  bool free = entry.report.pid == 0;
  if (free) {
    entry.report.pid = pid;
    entry.report.state = WorkerState::starting;
  }
  SpinLockRelease(&entry.mutex);
  return free;
}

void release_worker_entry(int index) {
  TimestampTz now = GetCurrentTimestamp();
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.pid = 0;
  entry.report.state = WorkerState::stopped;
  entry.report.last_exit = now;
  SpinLockRelease(&entry.mutex);
}

void set_worker_state(int index, WorkerState state) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.state = state;
  SpinLockRelease(&entry.mutex);
}

void record_round_start(int index, TimestampTz start) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.state = WorkerState::working;
  entry.report.last_round_start = start;
  SpinLockRelease(&entry.mutex);
}

void record_round_end(int index, TimestampTz end, uint64 swept, uint64 purged) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.state = WorkerState::idle;
  entry.report.last_round_end = end;
  entry.report.last_round_swept = swept;
  entry.report.last_round_purged = purged;
  entry.report.total_rounds += 1;
  SpinLockRelease(&entry.mutex);
}

Datum worker_status(FunctionCallInfo fcinfo) {
  if (!worker_status_attached())
    throw Error(sqlstate::not_preloaded, "idem's background worker is not running",
                "idem is not in shared_preload_libraries, so no worker maintains the key store "
                "and there is no status to show.",
                "Add idem to shared_preload_libraries and restart the server, or schedule "
                "SELECT idem.sweep_stale(); SELECT idem.purge_expired(); yourself (pg_cron).");
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  for (int i = 0; i < worker_database_count(); ++i) {
    WorkerReport report;
    read_worker_report(i, &report);
    Datum values[8];
    bool nulls[8] = {false, false, false, false, false, false, false, false};
    values[0] = NameGetDatum(&report.database);
    values[1] = Int32GetDatum(report.pid);
    nulls[1] = report.pid == 0;
    values[2] = CStringGetTextDatum(worker_state_name(report.state));
    values[3] = TimestampTzGetDatum(report.last_round_start);
    nulls[3] = report.last_round_start == 0;
    values[4] = TimestampTzGetDatum(report.last_round_end);
    nulls[4] = report.last_round_end == 0;
    values[5] = Int64GetDatum(static_cast<int64>(report.last_round_swept));
    values[6] = Int64GetDatum(static_cast<int64>(report.last_round_purged));
    values[7] = Int64GetDatum(static_cast<int64>(report.total_rounds));
    nulls[5] = nulls[6] = report.last_round_end == 0;
    tuplestore_putvalues(result->setResult, result->setDesc, values, nulls);
  }
  return static_cast<Datum>(0);
}

}  // namespace idem
