// One database's maintenance worker: rounds of sweep_stale then purge_expired,
// in bounded batches, each batch its own short transaction.
//
// Error handling: the main loop keeps only trivially destructible locals and
// catches Postgres errors per batch (contain) and per round with PG_TRY, so
// a failed batch (a lock_timeout set on the database, a user trigger that
// raises, a bug) is logged, rolled back, and the round goes on without it
// (see "One scope's failure" below); the round is reported as failed and
// retried after the next naptime; the process lives on and never turns an
// error into a restart loop. C++ exceptions from
// the shared batch code are turned into Postgres errors by run_guarded inside
// that PG_TRY. SIGTERM (die) and postmaster death end the process directly.
// SIGINT (pg_cancel_backend) cancels the batch of a round under way, an
// error like any other; between rounds it is dropped (drop_cancel_between_rounds).
#include "worker/completer.hpp"
#include "worker/completer_launch.hpp"
#include "pg/guard.hpp"
#include "keys/maintenance.hpp"
#include "messages/message_maintenance.hpp"
#include "base/stats.hpp"
#include "pure/batch_pace.hpp"
#include "worker/round_batch.hpp"
#include "worker/worker_settings.hpp"
#include "worker/worker_status.hpp"

extern "C" {
#include "access/xlog.h"
#include "commands/extension.h"
#include "mb/pg_wchar.h"
#include "nodes/pg_list.h"
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

// One scope's failure: a round whose batch fails (a trigger that raises for
// one scope's rows, a completer's owner's object that a statement meets)
// must not stop the maintenance of every other scope, round after round.
// So a batch's error is contained where it happens (contain): logged,
// rolled back, and noted as the round's failure (round_failure). A key stage
// (the sweep, the key purge) then goes on scope by scope, each scope's
// batches in their own transactions, and a scope whose batch fails is
// skipped for the rest of the round (failed_scopes); another stage, or a
// failure no scope can be blamed for, gives up that stage for this round
// and the round goes on with the next. A round with a failure is reported
// as failing (worker_status.hpp: state, error, since when, how many) and
// counted in idem.stats' failed_rounds; it does not count as a round done.
// Statics: they survive the longjmp out of a PG_TRY.
bool round_failed;
RoundError round_failure;
List *failed_scopes;                    // char *, in round_memory
MemoryContext round_memory = nullptr;   // the round's: survives its transactions

bool scope_failed(const char *scope) {
  ListCell *cell;
  foreach (cell, failed_scopes)
    if (strcmp(static_cast<const char *>(lfirst(cell)), scope) == 0) return true;
  return false;
}

// Copies text into a fixed buffer, cut at a character boundary.
void copy_clipped(char *buffer, size_t size, const char *text) {
  int length = pg_mbcliplen(text, static_cast<int>(strlen(text)), static_cast<int>(size) - 1);
  memcpy(buffer, text, static_cast<size_t>(length));
  buffer[length] = '\0';
}

// The error just caught (already reported) becomes the round's failure;
// scope, when not null, is skipped for the rest of the round.
void note_round_failure(const ErrorData *error, const char *scope) {
  round_failed = true;
  memset(&round_failure, 0, sizeof round_failure);
  memcpy(round_failure.sqlstate, unpack_sql_state(error->sqlerrcode), 5);
  copy_clipped(round_failure.message, sizeof round_failure.message,
               error->message != nullptr ? error->message : "");
  if (scope == nullptr) return;
  copy_clipped(round_failure.scope, sizeof round_failure.scope, scope);
  MemoryContext previous = MemoryContextSwitchTo(round_memory);
  failed_scopes = lappend(failed_scopes, pstrdup(scope));
  MemoryContextSwitchTo(previous);
  ereport(LOG, (errmsg("idem worker for database \"%s\": scope \"%s\" is skipped for the "
                       "rest of the round: its batch failed with SQLSTATE %s",
                       my_database, scope, round_failure.sqlstate),
                errhint("The round goes on with the other scopes; idem.worker_status shows the "
                        "error until a round succeeds.")));
}

// Runs step(argument), a unit of the round that runs its own transactions,
// containing its error: reported (with the round's CONTEXT line), the
// transaction rolled back, and the error noted against scope (or the round).
// False when it failed.
bool contain(void (*step)(void *), void *argument, const char *scope) {
  static bool succeeded;
  succeeded = false;
  MemoryContext context = CurrentMemoryContext;
  PG_TRY();
  {
    step(argument);
    succeeded = true;
  }
  PG_CATCH();
  {
    HOLD_INTERRUPTS();
    MemoryContextSwitchTo(round_memory);
    ErrorData *error = CopyErrorData();
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    note_round_failure(error, scope);
    FreeErrorData(error);
    RESUME_INTERRUPTS();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  return succeeded;
}

// One batch in its own transaction, of every scope (scope null) or of one.
// Sets rows to the rows changed, or -1 when the extension is gone (dropped
// since the round began).
struct BatchRun {
  Statement statement;
  int32 limit;
  const char *activity;
  const char *scope;
  int64 rows;
};

void run_batch_transaction(void *argument) {
  BatchRun *batch = static_cast<BatchRun *>(argument);
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  pgstat_report_activity(STATE_RUNNING, batch->activity);
  batch->rows = -1;
  if (extension_installed_in_transaction())
    batch->rows = DatumGetInt64(run_guarded([batch]() -> Datum {
      SpiSession session;
      spi_connect(&session);
      uint64 changed =
          batch->scope == nullptr
              ? run_round_batch(&session, batch->statement, batch->limit)
              : run_maintenance_batch_in_scope(&session, batch->statement, batch->limit,
                                               batch->scope);
      spi_finish(&session);
      return Int64GetDatum(static_cast<int64>(changed));
    }));
  PopActiveSnapshot();
  CommitTransactionCommand();
}

// The scopes that may have work for a key stage, read in a transaction of
// their own into the round's memory; count -1 when the extension is gone.
struct ScopeList {
  Statement statement;
  char **scopes;
  int64 count;
};

void list_scopes_transaction(void *argument) {
  ScopeList *list = static_cast<ScopeList *>(argument);
  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  list->count = -1;
  if (extension_installed_in_transaction())
    list->count = DatumGetInt64(run_guarded([list]() -> Datum {
      MemoryContext previous = MemoryContextSwitchTo(round_memory);
      SpiSession session;
      spi_connect(&session);  // copies go to the round's memory
      uint64 found = scopes_with_work(&session, list->statement, &list->scopes);
      spi_finish(&session);
      MemoryContextSwitchTo(previous);
      return Int64GetDatum(static_cast<int64>(found));
    }));
  PopActiveSnapshot();
  CommitTransactionCommand();
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

enum class Drained { done, failed, stop };

// Batch after batch (of every scope, or of one) while batches come back
// full, yielding to SIGTERM (and to a reload that disables the worker)
// between two batches. Flat out there is no latch wait between batches, so
// postmaster death is looked for here too. stop: the round must stop (the
// extension vanished or the worker was disabled); failed: a batch failed
// (contained and noted).
Drained drain_batches(Statement statement, const char *activity, const char *scope) {
  for (int full_in_a_row = 1;; full_in_a_row += full_in_a_row < INT_MAX ? 1 : 0) {
    BatchRun batch = {statement, worker_settings.batch_size, activity, scope, -1};
    if (!contain(run_batch_transaction, &batch, scope)) return Drained::failed;
    if (batch.rows < 0) return Drained::stop;
    count_batch(statement, static_cast<uint64>(batch.rows));
    if (batch.rows < batch.limit) return Drained::done;
    pause_after_full_batch(full_in_a_row);
    if (!PostmasterIsAlive()) proc_exit(1);
    CHECK_FOR_INTERRUPTS();
    reload_settings_if_requested();
    if (!worker_settings.enabled) return Drained::stop;
  }
}

// A key stage one scope at a time, leaving out the scopes that failed in
// this round; a scope whose batch fails joins them.
bool drain_scope_by_scope(Statement statement, const char *activity) {
  ScopeList list = {statement, nullptr, -1};
  if (!contain(list_scopes_transaction, &list, nullptr)) return true;  // the stage is given up
  if (list.count < 0) return false;
  for (int64 i = 0; i < list.count; ++i) {
    if (scope_failed(list.scopes[i])) continue;
    if (drain_batches(statement, activity, list.scopes[i]) == Drained::stop) return false;
  }
  return true;
}

// One stage of the round. Returns false when the round must stop.
bool drain(Statement statement, const char *activity) {
  bool key_stage = statement == Statement::sweep_stale || statement == Statement::purge_expired;
  if (key_stage && failed_scopes != NIL) return drain_scope_by_scope(statement, activity);
  switch (drain_batches(statement, activity, nullptr)) {
    case Drained::done:
      return true;
    case Drained::stop:
      return false;
    case Drained::failed:
      // The inbox's and the outbox's purges run SQL functions over tables
      // without scopes of their own to split by: the stage waits for the
      // next round, and the round goes on.
      return key_stage ? drain_scope_by_scope(statement, activity) : true;
  }
  return true;
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

void run_policy_step_contained(void *) { run_policy_step(); }

void run_round() {
  TimestampTz start = GetCurrentTimestamp();
  record_round_start(my_index, start);
  round_totals = RoundTotals{0, 0, 0, 0, 0};
  MemoryContext round_context = CurrentMemoryContext;
  round_memory = round_context;
  round_failed = false;
  failed_scopes = NIL;
  ErrorContextCallback error_context;
  error_context.callback = round_error_context;
  error_context.arg = nullptr;
  error_context.previous = error_context_stack;
  error_context_stack = &error_context;
  PG_TRY();
  {
    if (drain(Statement::sweep_stale, "idem: sweeping stale keys")) {
      // max_attempts and the completers (completer.hpp); a failure there
      // leaves the purges to run
      (void)contain(run_policy_step_contained, nullptr, nullptr);
      if (drain(Statement::purge_expired, "idem: purging expired keys"))
        // inbox: consumed messages and published events (message_maintenance.hpp)
        for (Statement purge : message_purges)
          if (!drain(purge, "idem: purging consumed messages and events"))
            break;
    }
  }
  PG_CATCH();
  {
    // What no stage contained (a cancel during a pause, say): report, roll
    // back, and keep the process; the round failed, the next one retries.
    HOLD_INTERRUPTS();
    MemoryContextSwitchTo(round_context);
    ErrorData *error = CopyErrorData();
    EmitErrorReport();
    AbortCurrentTransaction();
    FlushErrorState();
    note_round_failure(error, nullptr);
    FreeErrorData(error);
    RESUME_INTERRUPTS();
  }
  PG_END_TRY();
  error_context_stack = error_context.previous;
  MemoryContextSwitchTo(round_context);

  TimestampTz end = GetCurrentTimestamp();
  if (round_failed)
    record_round_failure(my_index, round_totals.swept, round_totals.purged, round_failure);
  else
    record_round_end(my_index, end, round_totals.swept, round_totals.purged);
  if (round_totals.swept != 0 || round_totals.purged != 0) {
    double elapsed_ms = static_cast<double>(end - start) / 1000.0;
    ereport(LOG, (errmsg("idem worker for database \"%s\": swept " UINT64_FORMAT
                         " stale keys, purged " UINT64_FORMAT " expired keys in %.1f ms "
                         "(%d batches, %d pauses)",
                         my_database, round_totals.swept, round_totals.purged, elapsed_ms,
                         round_totals.batches, round_totals.pauses)));
  }
  if (round_failed)
    ereport(LOG, (errmsg("idem worker for database \"%s\": the round failed (%d scopes skipped); "
                         "the next round retries after idem.naptime",
                         my_database, list_length(failed_scopes)),
                  errdetail("The last error: SQLSTATE %s: %s", round_failure.sqlstate,
                            round_failure.message)));
  if (round_totals.messages != 0)
    ereport(LOG, (errmsg("idem worker for database \"%s\": purged " UINT64_FORMAT
                         " consumed messages and published outbox events (%d batches, %d "
                         "pauses in the round)",
                         my_database, round_totals.messages, round_totals.batches,
                         round_totals.pauses)));
  // The one place a worker round is counted (its rows were, batch by batch,
  // in count_batch through count_maintenance_rows, as every caller of the
  // maintenance statements counts them): a failed one apart, so that
  // worker_rounds and last_worker_round stand for rounds done.
  if (round_failed)
    stats::count(stats::Counter::failed_rounds);
  else
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
    // A reload that turns the worker off (or on again) ends the wait at
    // once: the state follows the setting, not the next round's time.
    if ((state == WorkerState::idle && !worker_settings.enabled) ||
        (state == WorkerState::disabled && worker_settings.enabled))
      wait_ms = 0;
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
