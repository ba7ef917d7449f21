// The stripes of condition variables behind wait_slots.hpp.
#include "waits/wait_slots.hpp"

#include "pg/guard.hpp"
#include "base/stats.hpp"

extern "C" {
#include "access/hash.h"
#include "access/xlog.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "tcop/utility.h"
#include "utils/wait_event.h"
}

namespace idem::wait_slots {

namespace {

// A power of two; 1024 stripes cost 16 KiB of shared memory, and two keys
// waited on at the same moment share a stripe with probability 1/1024.
constexpr uint32 stripe_count = 1024;

struct Stripes {
  ConditionVariable stripes[stripe_count];
};

Stripes *shared = nullptr;  // set in every process by attach_shared

// The stripes this transaction's outcomes wake at commit: a bitmap, so a
// transaction that completes many keys broadcasts each stripe once.
constexpr int words = stripe_count / 64;
uint64 pending[words];
bool pending_any = false;
bool callback_registered = false;

void forget_pending() {
  for (auto &word : pending) word = 0;
  pending_any = false;
}

// After commit the outcome is visible to every new snapshot: broadcast.
// After abort nothing changed that a waiter could see. After PREPARE
// nothing is visible yet either: the outcome becomes visible at COMMIT
// PREPARED, which may run in any session, where wake_after_commit_prepared
// wakes every stripe.
void at_transaction_end(XactEvent event) {
  if (!pending_any) return;
  if (event == XACT_EVENT_COMMIT && shared != nullptr) {
    for (int w = 0; w < words; ++w)
      for (int bit = 0; bit < 64; ++bit)
        if (pending[w] & (uint64{1} << bit)) ConditionVariableBroadcast(&shared->stripes[w * 64 + bit]);
    stats::count(stats::Counter::wakeups_sent);
  }
  if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
      event == XACT_EVENT_PARALLEL_ABORT)
    forget_pending();
}

// A prepared transaction's outcomes become visible when COMMIT PREPARED
// returns, in whatever session runs it; nothing in the prepared state says
// which keys they were (an extension cannot add to a prepared transaction's
// state file, and the session that prepared it may be gone, or the server
// restarted since). So every stripe is broadcast: each waiter claims again,
// the waiters of that transaction's keys find their outcome, and any other
// goes back to sleep after one look. COMMIT PREPARED is rare and each
// broadcast of a stripe nobody waits on is a spinlock and an empty list.
// ROLLBACK PREPARED wakes no one, as a rollback does not.
void wake_after_commit_prepared(const Node *statement) {
  if (shared == nullptr || !IsA(statement, TransactionStmt)) return;
  // A plain cast after IsA: castNode takes a non-const pointer in assert builds.
  if (reinterpret_cast<const TransactionStmt *>(statement)->kind != TRANS_STMT_COMMIT_PREPARED)
    return;
  for (auto &stripe : shared->stripes) ConditionVariableBroadcast(&stripe);
  stats::count(stats::Counter::wakeups_sent);
}

ProcessUtility_hook_type previous_process_utility = nullptr;

uint32 wait_event = 0;
ConditionVariable *prepared = nullptr;  // the stripe this backend waits on

// PostgreSQL 17 names extension wait events; 15 shows them all as "Extension".
uint32 key_wait_event() {
  if (wait_event == 0) wait_event = compat::extension_wait_event("IdemWaitForKey");
  return wait_event;
}

}  // namespace

}  // namespace idem::wait_slots

extern "C" {
static void idem_wait_slots_xact_callback(XactEvent event, void *) {
  idem::run_guarded([event]() -> Datum {
    idem::wait_slots::at_transaction_end(event);
    return 0;
  });
}

// Runs the statement as it would run without idem; a COMMIT PREPARED that
// returned has made its transaction's outcomes visible: wake the waiters.
// The statement itself runs outside the guard: it is not idem's code, and
// this frame holds nothing a longjmp could skip; only idem's part is guarded
// (every utility statement, nested ones included, would otherwise carry the
// guard's error buffers on its stack).
static void idem_wait_slots_process_utility(PlannedStmt *statement, const char *query_string,
                                            bool read_only_tree, ProcessUtilityContext context,
                                            ParamListInfo params, QueryEnvironment *environment,
                                            DestReceiver *destination, QueryCompletion *completion) {
  if (idem::wait_slots::previous_process_utility != nullptr)
    idem::wait_slots::previous_process_utility(statement, query_string, read_only_tree, context,
                                               params, environment, destination, completion);
  else
    standard_ProcessUtility(statement, query_string, read_only_tree, context, params, environment,
                            destination, completion);
  const Node *utility = statement->utilityStmt;
  idem::run_guarded([utility]() -> Datum {
    idem::wait_slots::wake_after_commit_prepared(utility);
    return 0;
  });
}
}

namespace idem::wait_slots {

uint32 stripe_of(const text *scope, const text *key) {
  uint32 h = DatumGetUInt32(hash_any(reinterpret_cast<const unsigned char *>(VARDATA_ANY(scope)),
                                     VARSIZE_ANY_EXHDR(scope)));
  uint32 k = DatumGetUInt32(hash_any(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)),
                                     VARSIZE_ANY_EXHDR(key)));
  return hash_combine(h, k) & (stripe_count - 1);
}

bool wakeups_available() { return shared != nullptr && !RecoveryInProgress(); }

void prepare_to_wait(uint32 stripe) {
  prepared = &shared->stripes[stripe];
  ConditionVariablePrepareToSleep(prepared);
}

bool sleep(long timeout_ms) {
  // Once woken, Postgres puts this backend back on the list: a commit while
  // the waiter claims again still wakes its next sleep.
  return !ConditionVariableTimedSleep(prepared, timeout_ms, key_wait_event());
}

void stop_waiting() {
  ConditionVariableCancelSleep();
  prepared = nullptr;
}

void poll_sleep(long timeout_ms) {
  (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
                  key_wait_event());
  ResetLatch(MyLatch);
  CHECK_FOR_INTERRUPTS();
}

void wake_at_commit(uint32 stripe) {
  if (shared == nullptr) return;  // nobody can wait for a wakeup
  if (!callback_registered) {
    RegisterXactCallback(idem_wait_slots_xact_callback, nullptr);
    callback_registered = true;
  }
  pending[stripe / 64] |= uint64{1} << (stripe % 64);
  pending_any = true;
}

void wake_now(uint32 stripe) {
  if (shared != nullptr) ConditionVariableBroadcast(&shared->stripes[stripe]);
}

void install_commit_prepared_hook() {
  previous_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = idem_wait_slots_process_utility;
}

Size shared_size() { return sizeof(Stripes); }

void attach_shared(void *memory, bool found) {
  shared = static_cast<Stripes *>(memory);
  if (found) return;
  for (auto &stripe : shared->stripes) ConditionVariableInit(&stripe);
}

}  // namespace idem::wait_slots
