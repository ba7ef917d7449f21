// One database's maintenance worker: rounds of sweep_stale then purge_expired,
// in bounded batches, each batch its own short transaction.
//
// Error handling: the main loop keeps only trivially destructible locals and
// catches Postgres errors per round with PG_TRY, so a failed round (a
// lock_timeout set on the database, a user trigger that raises, a bug) is
// logged once, rolled back, and retried after the next naptime; the process
// lives on and never turns an error into a restart loop. C++ exceptions from
// the shared batch code are turned into Postgres errors by run_guarded inside
// that PG_TRY. SIGTERM (die) and postmaster death end the process directly.
// SIGINT (pg_cancel_backend) cancels the batch of a round under way, an
// error like any other; between rounds it is dropped (drop_cancel_between_rounds).
#include "policy/completer.hpp"
#include "policy/completer_launch.hpp"
#include "pg/guard.hpp"
#include "keys/maintenance.hpp"
#include "messages/message_maintenance.hpp"
#include "keys/stats.hpp"
#include "pure/batch_pace.hpp"
#include "worker/worker_settings.hpp"
#include "worker/worker_status.hpp"

extern "C" {
#include "access/xlog.h"
#include "commands/extension.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"
}

namespace idem {

namespace {

// This process's entry in idem.worker_status and its database.
int my_index = -1;
const char *my_database = nullptr;

// What one round did so far; static so that it survives a longjmp out of the
// round (no volatile locals needed) and the log line can report partial work.
struct RoundTotals {
  uint64 swept;
  uint64 purged;
  int batches;
  int pauses;       // pauses after a full batch (batch_pace.hpp): none flat out
  uint64 messages;  // inbox: consumed messages and published events purged
};
RoundTotals round_totals;

void release_entry_at_exit(int, Datum index) { release_worker_entry(DatumGetInt32(index)); }

// The worker logs in as the bootstrap superuser and runs SPI statements, so
// nothing a database owner or a role controls may choose what its names
// resolve to. Connecting applied the settings of ALTER DATABASE / ALTER ROLE
// ... SET search_path; this overrides them for the process's life, with a
// source that neither they nor postgresql.conf (at a reload) outrank, as
// every SECURITY DEFINER function of idem pins its own (sql/idem--1.0--1.1.sql,
// section search_path). Outside a transaction: the value is not checked
// against the catalog, and both schemas always exist.
void pin_search_path() {
  SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

void reload_settings_if_requested() {
  if (!ConfigReloadPending) return;
  ConfigReloadPending = false;
  ProcessConfigFile(PGC_SIGHUP);
}

// Inside a transaction. Another backend's CREATE EXTENSION is invisible here
// until it commits, and then every object of the script is there at once, so
// "not visible" also covers "being created". (creating_extension is true only
// in the backend that runs the script, never in this one.)
bool extension_installed_in_transaction() { return OidIsValid(get_extension_oid("idem", true)); }

bool extension_installed() {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  bool installed = extension_installed_in_transaction();
  CommitTransactionCommand();
  return installed;
}

// Why the worker may not work now, or idle when it may.
WorkerState readiness() {
  if (IsBinaryUpgrade) return WorkerState::binary_upgrade;
  if (RecoveryInProgress()) return WorkerState::standby;
  if (!worker_settings.enabled) return WorkerState::disabled;
  if (!extension_installed()) return WorkerState::waiting_for_extension;
  return WorkerState::idle;
}

// readiness() runs a transaction, where a cancel (or any error) may strike:
// outside a PG_TRY that would be FATAL, and a restart. Caught here, it is
// logged and rolled back, and the worker keeps its last state until the next
// naptime. Static: it must survive the longjmp.
WorkerState readiness_answer;

WorkerState guarded_readiness(WorkerState previous) {
  readiness_answer = previous;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  { readiness_answer = readiness(); }
  PG_CATCH();
  {
    HOLD_INTERRUPTS();
    MemoryContextSwitchTo(context);
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    RESUME_INTERRUPTS();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  return readiness_answer;
}

// pg_cancel_backend sends the worker SIGINT, which sets QueryCancelPending.
// In a round it cancels the batch at hand (run_round's PG_CATCH rolls it
// back and the worker carries on); between rounds there is nothing to
// cancel, and a CHECK_FOR_INTERRUPTS there, outside any PG_TRY, would make
// it FATAL: so it is dropped, as a backend drops one that arrives while it
// waits for the client's next command.
void drop_cancel_between_rounds() {
  if (!QueryCancelPending) return;
  QueryCancelPending = false;
  ereport(LOG, (errmsg("idem worker for database \"%s\" ignored a cancel request: no round "
                       "was running", my_database)));
}

const char *activity_for(WorkerState state) {
  switch (state) {
    case WorkerState::waiting_for_extension:
      return "idem: waiting for CREATE EXTENSION idem";
    case WorkerState::standby:
      return "idem: idle on a standby";
    case WorkerState::binary_upgrade:
      return "idem: idle during binary upgrade";
    case WorkerState::disabled:
      return "idem: idle, idem.worker_enabled is off";
    default:
      return "idem: waiting for the next round";
  }
}

// One log line when the worker starts waiting, and one when it resumes.
void log_transition(WorkerState from, WorkerState to) {
  if (from == to) return;
  switch (to) {
    case WorkerState::waiting_for_extension:
      ereport(LOG, (errmsg("idem worker for database \"%s\" is waiting: extension \"idem\" is "
                           "not installed there", my_database),
                    errhint("Run CREATE EXTENSION idem in database \"%s\"; the worker will start "
                            "maintaining it within idem.naptime.", my_database)));
      break;
    case WorkerState::standby:
      ereport(LOG, (errmsg("idem worker for database \"%s\" is idle: the server is a standby",
                           my_database)));
      break;
    case WorkerState::binary_upgrade:
      ereport(LOG, (errmsg("idem worker for database \"%s\" is idle during binary upgrade",
                           my_database)));
      break;
    case WorkerState::disabled:
      ereport(LOG, (errmsg("idem worker for database \"%s\" is idle: idem.worker_enabled is off",
                           my_database)));
      break;
    case WorkerState::idle:
      if (from != WorkerState::starting)
        ereport(LOG, (errmsg("idem worker resumes maintaining database \"%s\"", my_database)));
      break;
    default:
      break;
  }
}

// One batch in its own transaction. Returns the rows changed, or -1 when the
// extension is gone (dropped since the round began).
int64 run_batch_transaction(Statement statement, int32 limit, const char *activity) {
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  pgstat_report_activity(STATE_RUNNING, activity);
  int64 rows = -1;
  if (extension_installed_in_transaction())
    rows = DatumGetInt64(run_guarded([statement, limit]() -> Datum {
      SpiSession session;
      spi_connect(&session);
      uint64 changed = run_maintenance_batch(&session, statement, limit);
      spi_finish(&session);
      return Int64GetDatum(static_cast<int64>(changed));
    }));
  PopActiveSnapshot();
  CommitTransactionCommand();
  return rows;
}

// After a full batch the worker pauses, for a length that follows the
// backlog (batch_pace.hpp): idem.batch_delay after the first full batch in a
// row, shrinking with each further one, none once the batches keep coming
// back full. A small backlog is worked off in slices that leave the CPU and
// the WAL to the requests; a large one, which the paced worker would lose
// against, flat out. The pause lasts its full length even when the latch is
// set for something else (a catch-up interrupt, say); a reload applies the
// new delay counted from the same start, SIGTERM and disabling end it at once.
void pause_after_full_batch(int full_in_a_row) {
  if (batch_pace::pause_after_full_batch_ms(worker_settings.batch_delay_ms, full_in_a_row) > 0)
    round_totals.pauses += 1;
  TimestampTz start = GetCurrentTimestamp();
  for (;;) {
    TimestampTz end = TimestampTzPlusMilliseconds(
        start, batch_pace::pause_after_full_batch_ms(worker_settings.batch_delay_ms, full_in_a_row));
    TimestampTz now = GetCurrentTimestamp();
    if (now >= end || !worker_settings.enabled) return;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                    static_cast<long>((end - now + 999) / 1000), PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
    reload_settings_if_requested();
  }
}

// What a batch did, made visible as soon as it committed: its rows go into
// idem.stats and the round's totals so far into idem.worker_status, so that
// a long round (a large backlog, or a worker losing against the rate keys
// expire at) shows its progress batch by batch, not only when it ends.
void count_batch(Statement statement, uint64 rows) {
  round_totals.batches += 1;
  if (statement == Statement::sweep_stale)
    round_totals.swept += rows;
  else if (statement == Statement::purge_expired)
    round_totals.purged += rows;
  else
    round_totals.messages += rows;
  count_maintenance_rows(statement, rows);
  record_round_progress(my_index, round_totals.swept, round_totals.purged);
}

// Batch after batch while batches come back full, yielding to SIGTERM (and
// to a reload that disables the worker) between two batches. Flat out there
// is no latch wait between batches, so postmaster death is looked for here
// too. Returns false when the round must stop: the extension vanished or
// the worker was disabled.
bool drain(Statement statement, const char *activity) {
  for (int full_in_a_row = 1;; full_in_a_row += full_in_a_row < INT_MAX ? 1 : 0) {
    int32 limit = worker_settings.batch_size;
    int64 rows = run_batch_transaction(statement, limit, activity);
    if (rows < 0) return false;
    count_batch(statement, static_cast<uint64>(rows));
    if (rows < limit) return true;
    pause_after_full_batch(full_in_a_row);
    if (!PostmasterIsAlive()) proc_exit(1);
    CHECK_FOR_INTERRUPTS();
    reload_settings_if_requested();
    if (!worker_settings.enabled) return false;
  }
}

// Keys past max_attempts, then at most idem.batch_size completers, logged
// when they did anything; a full batch is paced like any other.
void run_policy_step() {
  CompleterTotals totals = {0, 0, 0, 0, false};
  run_completer_round(&totals);
  // Completers run on their own (completer_launch.hpp): a round starts some
  // and collects those started earlier that ended, so it says both.
  if (totals.exhausted != 0 || totals.runs != 0)
    ereport(LOG, (errmsg("idem worker for database \"%s\": ended " UINT64_FORMAT
                         " keys past max_attempts; started " UINT64_FORMAT " completers",
                         my_database, totals.exhausted, totals.runs)));
  if (totals.successes != 0 || totals.failures != 0)
    ereport(LOG, (errmsg("idem worker for database \"%s\": " UINT64_FORMAT
                         " completers ended: " UINT64_FORMAT " recorded an outcome, "
                         UINT64_FORMAT " failed",
                         my_database, totals.successes + totals.failures, totals.successes,
                         totals.failures)));
  if (totals.full_batch) {
    pause_after_full_batch(1);
    CHECK_FOR_INTERRUPTS();
    reload_settings_if_requested();
  }
}

// Names the database in the CONTEXT line of any error a round raises.
void round_error_context(void *) {
  errcontext("idem worker round in database \"%s\"", my_database);
}

void run_round() {
  TimestampTz start = GetCurrentTimestamp();
  record_round_start(my_index, start);
  round_totals = RoundTotals{0, 0, 0, 0, 0};
  MemoryContext round_context = CurrentMemoryContext;
  ErrorContextCallback error_context;
  error_context.callback = round_error_context;
  error_context.arg = nullptr;
  error_context.previous = error_context_stack;
  error_context_stack = &error_context;
  PG_TRY();
  {
    if (drain(Statement::sweep_stale, "idem: sweeping stale keys")) {
      run_policy_step();  // max_attempts and the completers (completer.hpp)
      if (drain(Statement::purge_expired, "idem: purging expired keys"))
        // inbox: consumed messages and published events (message_maintenance.hpp)
        for (Statement purge : message_purges)
          if (!drain(purge, "idem: purging consumed messages and events"))
            break;
    }
  }
  PG_CATCH();
  {
    // Report, roll back, and keep the process: the next round retries.
    HOLD_INTERRUPTS();
    MemoryContextSwitchTo(round_context);
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    RESUME_INTERRUPTS();
  }
  PG_END_TRY();
  error_context_stack = error_context.previous;
  MemoryContextSwitchTo(round_context);

  TimestampTz end = GetCurrentTimestamp();
  record_round_end(my_index, end, round_totals.swept, round_totals.purged);
  if (round_totals.swept != 0 || round_totals.purged != 0) {
    double elapsed_ms = static_cast<double>(end - start) / 1000.0;
    ereport(LOG, (errmsg("idem worker for database \"%s\": swept " UINT64_FORMAT
                         " stale keys, purged " UINT64_FORMAT " expired keys in %.1f ms "
                         "(%d batches, %d pauses)",
                         my_database, round_totals.swept, round_totals.purged, elapsed_ms,
                         round_totals.batches, round_totals.pauses)));
  }
  if (round_totals.messages != 0)
    ereport(LOG, (errmsg("idem worker for database \"%s\": purged " UINT64_FORMAT
                         " consumed messages and published outbox events (%d batches, %d "
                         "pauses in the round)",
                         my_database, round_totals.messages, round_totals.batches,
                         round_totals.pauses)));
  // The one place a worker round is counted (its rows were, batch by batch,
  // in count_batch through count_maintenance_rows, as every caller of the
  // maintenance statements counts them).
  stats::count_worker_round(end);
  pgstat_report_stat(true);
}

void worker_main(Datum argument) {
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();

  int index = DatumGetInt32(argument);
  // A duplicate (say, started by a launcher that restarted while this
  // database's worker ran) leaves at once: exit code 0 is never restarted.
  if (!worker_status_attached() || index < 0 || index >= worker_database_count()) return;
  if (!claim_worker_entry(index, MyProcPid)) return;
  before_shmem_exit(release_entry_at_exit, Int32GetDatum(index));
  my_index = index;
  my_database = MyBgworkerEntry->bgw_extra;

  // The launcher checked that the database exists; if it was dropped since,
  // this FATAL ends the process and the launcher waits for the database.
  BackgroundWorkerInitializeConnection(my_database, nullptr, 0);
  pin_search_path();
  ereport(LOG, (errmsg("idem worker started for database \"%s\"", my_database)));

  MemoryContext loop_context =
      AllocSetContextCreate(TopMemoryContext, "idem worker loop", ALLOCSET_DEFAULT_SIZES);
  WorkerState state = WorkerState::starting;
  TimestampTz last_round_end = 0;  // 0: go at once
  for (;;) {
    MemoryContextSwitchTo(loop_context);
    MemoryContextReset(loop_context);
    drop_cancel_between_rounds();
    CHECK_FOR_INTERRUPTS();
    reload_settings_if_requested();

    // Measured from the end of the last round with the current naptime, so
    // a reload that changes it takes effect for the very next wait.
    long wait_ms = 0;
    if (last_round_end != 0) {
      TimestampTz due = TimestampTzPlusMilliseconds(
          last_round_end, static_cast<int64>(worker_settings.naptime_s) * 1000);
      TimestampTz now = GetCurrentTimestamp();
      wait_ms = due > now ? static_cast<long>((due - now + 999) / 1000) : 0;
    }
    if (wait_ms > 0) {
      // A completer past its deadline is ended on time, not at the next
      // round (completer_launch.hpp); its exit sets the latch.
      int64 watch_ms = watch_completers();
      if (watch_ms >= 0 && watch_ms < wait_ms) wait_ms = static_cast<long>(watch_ms);
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
                      PG_WAIT_EXTENSION);
      ResetLatch(MyLatch);
      continue;  // woken early (SIGHUP, SIGTERM) or due: look again
    }

    WorkerState next = guarded_readiness(state);
    MemoryContextSwitchTo(loop_context);
    log_transition(state, next);
    state = next;
    if (state == WorkerState::idle) {
      run_round();
    } else {
      set_worker_state(my_index, state);
    }
    pgstat_report_activity(STATE_IDLE, activity_for(state));
    last_round_end = GetCurrentTimestamp();
  }
}

}  // namespace

}  // namespace idem

extern "C" {

// One database's worker process (bgw_function_name, started by the launcher;
// the argument is the database's index in idem.database). It never returns
// normally: SIGTERM and postmaster death end it inside the body.
IDEM_BGWORKER_MAIN(worker_main, idem::worker_main)

}  // extern "C"
