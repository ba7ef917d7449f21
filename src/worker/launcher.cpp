// The launcher: one background worker per server, connected to no database.
//
// Why not register one static worker per database? A worker connects with
// BackgroundWorkerInitializeConnection, which ends the process with FATAL when
// the database does not exist; the postmaster would then restart it every
// bgw_restart_time and flood the log for as long as the database is missing.
// A process connected to no database can still read the shared catalog
// pg_database, so the launcher checks there first and starts a database's
// worker (a dynamic background worker) only once it can connect. It logs one
// line when a database is missing and one when it appears.
//
// The launcher also restarts a worker that ended (pg_terminate_backend, an
// error it could not survive), after worker_restart_interval_s and only if its
// database can still be connected to, so even a worker that fails at every
// start costs one attempt per interval, never a tight loop.
#include "worker/launcher.hpp"

#include "pg/guard.hpp"
#include "worker/worker_settings.hpp"
#include "worker/worker_status.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"
}

namespace idem {

namespace {

// How often the launcher looks at its databases when nothing wakes it; a
// worker's start or exit wakes it at once (bgw_notify_pid).
constexpr long launcher_poll_ms = 1000;

// How long a worker that ended stays down before the launcher starts it
// again; also the launcher's own bgw_restart_time.
constexpr int worker_restart_interval_s = 5;

enum class DatabaseAvailability { available, missing, refuses_connections };

// What the launcher remembers about each database; process-local.
struct LaunchRecord {
  BackgroundWorkerHandle *handle;  // of the worker it started last; may be stale
  TimestampTz last_start;          // rate-limits starts, whatever the outcome
  DatabaseAvailability reported;   // what it last logged about the database
  bool reported_no_slot;           // logged that no worker slot was free
};

LaunchRecord records[max_worker_databases];

void fill_worker_common(BackgroundWorker *worker) {
  memset(worker, 0, sizeof *worker);
  worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  // Consistent state, not recovery finished: on a hot standby the workers
  // run too, idle, and show it in idem.worker_status (state 'standby').
  worker->bgw_start_time = BgWorkerStart_ConsistentState;
  strlcpy(worker->bgw_library_name, "idem", BGW_MAXLEN);
}

// A plain heap scan of pg_database: with no database selected, the launcher
// may read shared catalogs but not through their indexes (which would need
// pg_class), as the autovacuum launcher does.
DatabaseAvailability database_availability(const char *name) {
  DatabaseAvailability result = DatabaseAvailability::missing;
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  Relation pg_database = table_open(DatabaseRelationId, AccessShareLock);
  TableScanDesc scan = table_beginscan_catalog(pg_database, 0, nullptr);
  HeapTuple tuple;
  while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
    Form_pg_database database = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
    if (strcmp(NameStr(database->datname), name) != 0) continue;
    result = database->datallowconn ? DatabaseAvailability::available
                                    : DatabaseAvailability::refuses_connections;
    break;
  }
  table_endscan(scan);
  table_close(pg_database, AccessShareLock);
  PopActiveSnapshot();
  CommitTransactionCommand();
  return result;
}

// One line per change, so a database that stays missing is mentioned once.
void report_availability(int index, const char *name, DatabaseAvailability now) {
  LaunchRecord &record = records[index];
  if (record.reported == now) return;
  if (now == DatabaseAvailability::missing)
    ereport(LOG, (errmsg("idem worker is waiting for database \"%s\", which does not exist", name),
                  errhint("Create the database, or remove it from idem.database and restart.")));
  else if (now == DatabaseAvailability::refuses_connections)
    ereport(LOG, (errmsg("idem worker is waiting for database \"%s\", which does not allow "
                         "connections", name)));
  else
    ereport(LOG, (errmsg("idem worker found database \"%s\" and starts maintaining it", name)));
  record.reported = now;
}

bool worker_alive(int index, const WorkerReport &report) {
  if (report.pid != 0) return true;
  LaunchRecord &record = records[index];
  if (record.handle == nullptr) return false;
  pid_t pid;
  BgwHandleStatus status = GetBackgroundWorkerPid(record.handle, &pid);
  if (status == BGWH_NOT_YET_STARTED || status == BGWH_STARTED) return true;
  pfree(record.handle);
  record.handle = nullptr;
  return false;
}

void start_worker(int index, const char *name) {
  LaunchRecord &record = records[index];
  BackgroundWorker worker;
  fill_worker_common(&worker);
  worker.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher restarts it, after checking
  strlcpy(worker.bgw_function_name, "idem_worker_main", BGW_MAXLEN);
  snprintf(worker.bgw_name, BGW_MAXLEN, "idem worker for database %s", name);
  strlcpy(worker.bgw_type, "idem worker", BGW_MAXLEN);
  worker.bgw_main_arg = Int32GetDatum(index);
  strlcpy(worker.bgw_extra, name, BGW_EXTRALEN);
  worker.bgw_notify_pid = MyProcPid;

  record.last_start = GetCurrentTimestamp();
  set_worker_state(index, WorkerState::starting);
  MemoryContext previous = MemoryContextSwitchTo(TopMemoryContext);
  bool registered = RegisterDynamicBackgroundWorker(&worker, &record.handle);
  MemoryContextSwitchTo(previous);
  if (registered) {
    record.reported_no_slot = false;
    return;
  }
  record.handle = nullptr;
  set_worker_state(index, WorkerState::stopped);
  if (!record.reported_no_slot)
    ereport(WARNING, (errmsg("idem could not start its worker for database \"%s\": no free "
                             "background worker slot", name),
                      errhint("Raise max_worker_processes (idem needs one more than the number "
                              "of databases in idem.database) and restart the server.")));
  record.reported_no_slot = true;
}

void look_after(int index, TimestampTz now) {
  WorkerReport report;
  read_worker_report(index, &report);
  if (worker_alive(index, report)) return;
  const int interval_ms = worker_restart_interval_s * 1000;
  LaunchRecord &record = records[index];
  if (record.last_start != 0 && !TimestampDifferenceExceeds(record.last_start, now, interval_ms))
    return;
  if (report.last_exit != 0 && !TimestampDifferenceExceeds(report.last_exit, now, interval_ms))
    return;
  const char *name = NameStr(report.database);
  DatabaseAvailability availability = database_availability(name);
  report_availability(index, name, availability);
  if (availability != DatabaseAvailability::available) {
    set_worker_state(index, WorkerState::waiting_for_database);
    return;
  }
  start_worker(index, name);
}

}  // namespace

void register_background_workers() {
  if (!process_shared_preload_libraries_in_progress) return;
  char databases[max_worker_databases][64];
  int count = parse_worker_databases(worker_settings.databases, databases, max_worker_databases);
  if (count < 0) count = 0;  // cannot happen: the check hook accepted the list
  configure_worker_status(databases, count);

  BackgroundWorker launcher;
  fill_worker_common(&launcher);
  launcher.bgw_restart_time = worker_restart_interval_s;
  strlcpy(launcher.bgw_function_name, "idem_launcher_main", BGW_MAXLEN);
  strlcpy(launcher.bgw_name, "idem launcher", BGW_MAXLEN);
  strlcpy(launcher.bgw_type, "idem launcher", BGW_MAXLEN);
  RegisterBackgroundWorker(&launcher);
}

namespace {

void launcher_main(Datum) {
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, die);
  // The launcher runs no statement a cancel could mean: pg_cancel_backend
  // must not turn into an error outside any PG_TRY, a FATAL and a restart.
  pqsignal(SIGINT, SIG_IGN);
  BackgroundWorkerUnblockSignals();
  // No database: enough to read pg_database, and never missing. The launcher
  // runs no SQL (it reads pg_database with a heap scan), so no search_path
  // can reach it; the per-database workers pin theirs (worker.cpp).
  BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
  for (int i = 0; i < max_worker_databases; ++i)
    records[i] = LaunchRecord{nullptr, 0, DatabaseAvailability::available, false};

  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < worker_database_count(); ++i) {
      // pg_upgrade runs the server with -b: nothing may touch the databases.
      if (IsBinaryUpgrade)
        set_worker_state(i, WorkerState::binary_upgrade);
      else
        look_after(i, now);
    }
    pgstat_report_activity(STATE_IDLE, "idem: watching the workers of idem.database");
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, launcher_poll_ms,
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
  }
}

}  // namespace

}  // namespace idem

extern "C" {

// The launcher's process (bgw_function_name, registered by _PG_init). It
// never returns normally: SIGTERM and postmaster death end it inside the body.
IDEM_BGWORKER_MAIN(launcher_main, idem::launcher_main)

}  // extern "C"
