// idem.run_maintenance(): one worker round (worker.cpp) in one SQL call, for
// a server without the worker (no preload) or a scheduler such as pg_cron.
// The same stages in the same order, the same statements: sweep_stale, keys
// past max_attempts and the completers (completer_call.hpp), purge_expired,
// then the inbox's and outbox's purges. A call cannot commit between
// batches, so each stage runs at most batches_per_stage batches of
// idem.batch_size in the caller's transaction, and the report says when one
// stopped there with work left ("more"). Returns the counts per stage as
// jsonb; README, "run_maintenance", names the keys.
#include "keys/maintenance.hpp"
#include "messages/message_maintenance.hpp"
#include "pg/guard.hpp"
#include "worker/completer_call.hpp"
#include "worker/round_batch.hpp"
#include "worker/worker_settings.hpp"

extern "C" {
#include "tcop/utility.h"
}

namespace idem {

namespace {

// One call does at most this many batches per stage: a backlog is worked off
// over several calls (a scheduler's next run), each call a bounded
// transaction, as the worker's round works it off in bounded transactions.
constexpr int batches_per_stage = 10;

struct CallTotals {
  uint64 swept;
  uint64 purged_keys;
  uint64 purged_messages;
  uint64 purged_events;
  int batches;
  bool more;
};
IDEM_LONGJMP_SAFE(CallTotals);

uint64 drain(SpiSession *session, Statement statement, int32 limit, CallTotals *totals) {
  uint64 total = 0;
  for (int batch = 0; batch < batches_per_stage; ++batch) {
    CHECK_FOR_INTERRUPTS();
    uint64 rows = run_round_batch(session, statement, limit);
    count_maintenance_rows(statement, rows);
    totals->batches += 1;
    total += rows;
    if (rows < static_cast<uint64>(limit)) return total;
  }
  totals->more = true;
  return total;
}

Datum report(const CallTotals &call, const CompleterTotals &completers) {
  char *text = psprintf(
      "{\"swept\": " UINT64_FORMAT ", \"exhausted\": " UINT64_FORMAT
      ", \"completer_runs\": " UINT64_FORMAT ", \"completer_successes\": " UINT64_FORMAT
      ", \"completer_failures\": " UINT64_FORMAT ", \"purged_keys\": " UINT64_FORMAT
      ", \"purged_messages\": " UINT64_FORMAT ", \"purged_events\": " UINT64_FORMAT
      ", \"batches\": %d, \"more\": %s}",
      call.swept, completers.exhausted, completers.runs, completers.successes,
      completers.failures, call.purged_keys, call.purged_messages, call.purged_events,
      call.batches, call.more || completers.full_batch ? "true" : "false");
  return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
}

Datum run_maintenance(FunctionCallInfo) {
  // A completer may not run maintenance: the call would claim other
  // scopes' keys and run their completers from inside a tenant's run. Like
  // any error of a completer's, the refusal is the completer's failure
  // (completer_call.cpp contains it).
  if (completer_is_running())
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("idem.run_maintenance() may not be called by a completer"),
             errdetail("A completer runs for one key of its own scope; maintenance works on "
                       "every scope's keys."),
             errhint("Call idem.run_maintenance() from a scheduler (pg_cron) or an operator's "
                     "session, not from a completer.")));
  // Refused as a whole where nothing may be written (READ ONLY, a standby),
  // naming this call rather than its first statement.
  PreventCommandIfReadOnly("idem.run_maintenance()");
  PreventCommandIfParallelMode("idem.run_maintenance()");
  PreventCommandDuringRecovery("idem.run_maintenance()");
  int32 limit = worker_settings.batch_size;
  CallTotals call = {0, 0, 0, 0, 0, false};
  CompleterTotals completers = {0, 0, 0, 0, false};
  SpiSession session;
  spi_connect(&session);
  call.swept = drain(&session, Statement::sweep_stale, limit, &call);
  run_completers_in_call(&session, limit, batches_per_stage, &completers);
  call.purged_keys = drain(&session, Statement::purge_expired, limit, &call);
  call.purged_messages = drain(&session, Statement::purge_consumed, limit, &call);
  call.purged_events = drain(&session, Statement::purge_published, limit, &call);
  spi_finish(&session);
  return report(call, completers);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(run_maintenance, idem::run_maintenance)

}  // extern "C"
