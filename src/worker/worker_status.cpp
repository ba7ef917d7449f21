#include "worker/worker_status.hpp"

#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "worker/worker_settings.hpp"

extern "C" {
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

WorkerSharedState *shared = nullptr;  // set in every process by attach_worker_status

// Copied in the postmaster by configure_worker_status; children inherit it.
NameData configured_databases[max_worker_databases];
int configured_count = 0;

// database, pid, state, last_round_start, last_round_end, last_round_swept,
// last_round_purged, total_rounds; then (1.2) failed_rounds, failing_since,
// last_error, last_error_sqlstate, last_error_scope. A schema older than the
// library (1.0's and 1.1's declaration, before ALTER EXTENSION UPDATE) gets
// the first eight.
constexpr int worker_status_columns_1_0 = 8;
constexpr int worker_status_columns = 13;

const char *const state_names[] = {
    "stopped", "starting", "waiting for database", "waiting for extension", "standby",
    "binary upgrade", "disabled", "idle", "working", "failing",
};
static_assert(sizeof state_names / sizeof state_names[0] ==
                  static_cast<size_t>(WorkerState::failing) + 1,
              "one name per WorkerState");

WorkerEntry &entry_at(int index) {
  Assert(shared != nullptr && index >= 0 && index < shared->database_count);
  return shared->entries[index];
}

// The name shown in idem.worker_status.state.
const char *worker_state_name(WorkerState state) {
  return state_names[static_cast<int>(state)];
}

}  // namespace

void configure_worker_status(const char (*databases)[64], int count) {
  configured_count = count;
  for (int i = 0; i < count; ++i) namestrcpy(&configured_databases[i], databases[i]);
}

Size worker_status_shared_size() { return sizeof(WorkerSharedState); }

// In the postmaster at start and after a crash restart (found is then false
// again: the memory is new), and in EXEC_BACKEND children (found true).
void attach_worker_status(void *memory, bool found) {
  shared = static_cast<WorkerSharedState *>(memory);
  if (found) return;
  memset(shared, 0, sizeof(WorkerSharedState));
  shared->database_count = configured_count;
  for (int i = 0; i < configured_count; ++i) {
    WorkerEntry &entry = shared->entries[i];
    SpinLockInit(&entry.mutex);
    entry.report.database = configured_databases[i];
    entry.report.state = WorkerState::stopped;
  }
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
  entry.report.last_round_swept = 0;
  entry.report.last_round_purged = 0;
  SpinLockRelease(&entry.mutex);
}

void record_round_progress(int index, uint64 swept, uint64 purged) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.last_round_swept = swept;
  entry.report.last_round_purged = purged;
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
  entry.report.failing_since = 0;
  SpinLockRelease(&entry.mutex);
}

void record_round_failure(int index, uint64 swept, uint64 purged, const RoundError &error) {
  WorkerEntry &entry = entry_at(index);
  SpinLockAcquire(&entry.mutex);
  entry.report.state = WorkerState::failing;
  entry.report.last_round_swept = swept;
  entry.report.last_round_purged = purged;
  entry.report.failed_rounds += 1;
  if (entry.report.failing_since == 0) entry.report.failing_since = entry.report.last_round_start;
  entry.report.last_error = error;
  SpinLockRelease(&entry.mutex);
}

namespace {

// idem.worker_status(): one row per configured database. Raises 55000 when
// idem was not preloaded.
Datum worker_status(FunctionCallInfo fcinfo) {
  if (!worker_status_attached())
    ereport(ERROR, (errcode_of(sqlstate::not_preloaded),
                    errmsg("idem's background worker is not running"),
                    errdetail("idem is not in shared_preload_libraries, so no worker maintains "
                              "the key store and there is no status to show."),
                    errhint("Add idem to shared_preload_libraries and restart the server, or "
                            "schedule SELECT idem.sweep_stale(); SELECT idem.purge_expired(); "
                            "yourself (pg_cron).")));
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  int columns = result->setDesc->natts;
  if (columns != worker_status_columns && columns != worker_status_columns_1_0) {
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.worker_status() is declared with the wrong columns"),
                    errdetail("it returns %d columns; the library fills %d or %d",
                              result->setDesc->natts, worker_status_columns_1_0,
                              worker_status_columns),
                    errhint("Reinstall the extension: the library and its SQL script disagree.")));
  }
  for (int i = 0; i < worker_database_count(); ++i) {
    WorkerReport report;
    read_worker_report(i, &report);
    Datum values[worker_status_columns];
    bool nulls[worker_status_columns] = {};
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
    // NULL before the first round begins; from then on the round under
    // way's totals so far, or the last completed round's.
    nulls[5] = nulls[6] = report.last_round_start == 0;
    values[8] = Int64GetDatum(static_cast<int64>(report.failed_rounds));
    values[9] = TimestampTzGetDatum(report.failing_since);
    nulls[9] = report.failing_since == 0;
    // The last failed round's error, NULL before any round failed.
    const RoundError &error = report.last_error;
    bool no_error = error.sqlstate[0] == '\0';
    values[10] = no_error ? Datum(0) : CStringGetTextDatum(error.message);
    values[11] = no_error ? Datum(0) : CStringGetTextDatum(error.sqlstate);
    values[12] = error.scope[0] == '\0' ? Datum(0) : CStringGetTextDatum(error.scope);
    nulls[10] = nulls[11] = no_error;
    nulls[12] = error.scope[0] == '\0';
    tuplestore_putvalues(result->setResult, result->setDesc, values, nulls);
  }
  return static_cast<Datum>(0);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(worker_status, idem::worker_status)

}  // extern "C"
