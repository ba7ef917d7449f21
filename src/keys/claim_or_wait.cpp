// idem.claim_or_wait: claim as claim_idempotency_key does; while the answer
// is processing_active, wait (no row lock, no transaction id: between
// attempts the waiter holds nothing but its snapshot of the calling
// statement) and claim again when the owner commits an outcome, its lock
// runs out, or its bound session ends, for at most max_wait.
#include "keys/claim.hpp"
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "keys/statement_memo.hpp"
#include "base/stats.hpp"
#include "waits/wait_slots.hpp"

extern "C" {
#include "utils/resowner.h"
}

namespace idem {

namespace {

// Polling (no preload, hot standby): the first look again after 10 ms,
// doubling up to a second between looks.
constexpr long first_poll_ms = 10;
constexpr long max_poll_ms = 1000;

// An owner's lock ends at locked_until; the waiter looks again just after.
constexpr long lock_end_margin_ms = 1;

// One attempt in a subtransaction of its own. An attempt that lost a race
// (its takeover's UPDATE waited for the winner's row lock and then matched
// nothing) has locked the row with its subtransaction's id; such an
// attempt, which found the key in flight after all, is rolled back, so the
// waiter holds no row lock while it sleeps and the new owner's outcome does
// not wait for it. Any other attempt is kept: an attempt that only looked
// took no transaction id, and committing its subtransaction leaves the
// waiter on its condition variable's list, where a rollback would take it
// off (the sleep then only re-arms, and the waiter looks once more).
//
// An error inside (a statement_timeout, a cancel, P4002) must roll the
// subtransaction back before it travels on: left open, the caller's
// transaction would stay aborted after the error, as PL/pgSQL's exception
// blocks know. So the attempt runs under PG_TRY, and its C++ exceptions are
// turned into Postgres errors by a guard of its own first, so that only a
// longjmp ever leaves the PG_TRY.
void claim_attempt(ClaimRequest *request, ClaimAnswer *answer) {
  MemoryContext caller_context = CurrentMemoryContext;
  ResourceOwner caller_owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  MemoryContextSwitchTo(caller_context);  // the answer outlives the subtransaction
  PG_TRY();
  {
    run_guarded([request, answer]() -> Datum {
      claim_once(request, answer);
      return 0;
    });
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller_context);
    ErrorData *error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(caller_context);
    CurrentResourceOwner = caller_owner;
    ReThrowError(error);
  }
  PG_END_TRY();
  if (answer->kind == ClaimKind::processing_active &&
      TransactionIdIsValid(GetCurrentTransactionIdIfAny()))
    RollbackAndReleaseCurrentSubTransaction();
  else
    ReleaseCurrentSubTransaction();
  MemoryContextSwitchTo(caller_context);
  CurrentResourceOwner = caller_owner;
}

long ms_until(TimestampTz from, TimestampTz to) {
  if (to <= from) return 0;
  int64 ms = (to - from + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<long>(ms);
}

Datum claim_or_wait(FunctionCallInfo fcinfo) {
  ClaimRequest request;
  prepare_claim(fcinfo, 4, &request);
  TimestampTz started = GetCurrentTimestamp();
  TimestampTz deadline = require_positive_interval(
      fcinfo, 3, "max_wait", started, request.name,
      "Pass how long to wait for the key's owner, such as '10 seconds'.");
  ClaimAnswer answer;
  // A transaction snapshot never sees the outcome it would wait for.
  if (IsolationUsesXactSnapshot()) {
    claim_once(&request, &answer);
  } else {
    bool wake = wait_slots::wakeups_available();
    if (wake) wait_slots::prepare_to_wait(request.stripe);
    long poll_ms = first_poll_ms;
    bool waited = false;
    for (;;) {
      claim_attempt(&request, &answer);
      if (waited) stats::count(stats::Counter::wait_attempts);
      TimestampTz now = GetCurrentTimestamp();
      if (answer.kind != ClaimKind::processing_active || now >= deadline) break;
      if (!waited) {
        waited = true;
        stats::count(stats::Counter::waits_started);
        stats::count(stats::Counter::wait_attempts);  // the attempt that found the key in flight
        if (!wake) stats::count(stats::Counter::polling_fallbacks);
      }
      long sleep_ms = ms_until(now, deadline);
      if (!answer.locked_until_null)
        sleep_ms = Min(sleep_ms, ms_until(now, answer.locked_until) + lock_end_margin_ms);
      if (wake) {
        wait_slots::sleep(sleep_ms);
      } else {
        wait_slots::poll_sleep(Min(sleep_ms, poll_ms));
        poll_ms = Min(poll_ms * 2, max_poll_ms);
      }
    }
    if (wake) wait_slots::stop_waiting();
    if (waited) {
      stats::count(answer.kind == ClaimKind::processing_active ? stats::Counter::waits_timed_out
                                                               : stats::Counter::waits_answered);
      stats::count(stats::Counter::wait_time_us,
                   static_cast<uint64>(GetCurrentTimestamp() - started));
    }
  }
  return answer_claim(answer);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION_PER_ROW(claim_or_wait, idem::claim_or_wait)

}  // extern "C"
