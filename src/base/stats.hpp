// Live counters in shared memory, kept per database, pg_stat_statements'
// way: allocated through the shmem request/startup hooks (shared_memory.hpp),
// so they exist only when idem is in shared_preload_libraries. Without the preload every
// count() is a no-op and reading them raises SQLSTATE 55000.
//
// Each event is counted when the call that causes it returns (or raises
// P4002/P4012), not when its transaction commits: a claim whose transaction
// later rolls back has still been counted, as pg_stat_statements counts calls.
#pragma once

#include "pure/classify.hpp"
#include "pg/pg.hpp"

// Atomics are the only Postgres facility the inline counting path needs.
extern "C" {
#include "port/atomics.h"
}

namespace idem {
namespace stats {

// One counter per event; the order is the order of the columns of idem.stats.
// The first six are the claim kinds, taken from ClaimKind (count_claim).
enum class Counter {
  new_claim = static_cast<int>(ClaimKind::new_claim),
  replay_success = static_cast<int>(ClaimKind::replay_success),
  processing_active = static_cast<int>(ClaimKind::processing_active),
  processing_stale = static_cast<int>(ClaimKind::processing_stale),
  retryable_failure = static_cast<int>(ClaimKind::retryable_failure),
  final_failure = static_cast<int>(ClaimKind::final_failure),
  request_mismatches,  // P4002 raised by a claim
  stale_fences,        // P4012 raised by an owner's write
  marked_succeeded,
  marked_failed_retryable,
  marked_failed_final,
  recovery_points_set,
  rows_swept,
  rows_purged,
  worker_rounds,
  // idem.claim_or_wait and idem.bind_lock_to_session (lease branch)
  waits_started,            // calls that found the key in flight and waited
  waits_answered,           // waits that ended with an answer other than processing_active
  waits_timed_out,          // waits that ran out of max_wait
  wait_time_us,             // total time spent waiting (mean = this / ended waits)
  polling_fallbacks,        // waits that polled (no preload, hot standby)
  session_bound_takeovers,  // stale takeovers of a key whose bound session ended
  // the completer (completer.hpp), counted by the worker as it runs them
  completer_runs,       // completers called on a key the worker had claimed
  completer_successes,  // ... that recorded an outcome with the worker's fence
  completer_failures,   // ... that raised, were cancelled, or recorded nothing
  // what wakes a waiter, and what the waiters did when woken (wait_slots.hpp)
  wait_attempts,  // claim attempts of the calls that waited, the first included
  wakeups_sent,   // commits that woke waiters: an outcome's commit, a COMMIT PREPARED
  // what the worker and idem.run_maintenance() purged besides keys (1.2)
  messages_purged,  // consumed inbox messages past their retention
  events_purged,    // published outbox events past idem.outbox_retention
  // worker rounds that failed, in all or for some scopes (1.2; worker.cpp)
  failed_rounds,
};
// The columns after the claim kinds follow them without a gap.
static_assert(static_cast<int>(Counter::request_mismatches) ==
                  static_cast<int>(ClaimKind::final_failure) + 1,
              "idem.stats columns: the claim kinds come first, in ClaimKind order");
inline constexpr int counter_count = static_cast<int>(Counter::failed_rounds) + 1;
// How many counters each version's idem.stats_counters() returns: every
// version keeps the columns of the one before and adds its own after them.
inline constexpr int counters_of_1_0 = static_cast<int>(Counter::worker_rounds) + 1;
inline constexpr int counters_of_1_1 = static_cast<int>(Counter::wakeups_sent) + 1;

// Databases with a row of their own; events of any further database are
// counted together in one overflow row (datid NULL in idem.stats). A row of a
// dropped database is recycled when a new database needs one.
inline constexpr int max_databases = 64;

// One database's counters. Timestamps are TimestampTz stored as uint64;
// last_worker_round is 0 until the first round.
struct DatabaseCounters {
  pg_atomic_uint32 datid;  // InvalidOid: free (or the overflow row)
  pg_atomic_uint64 counters[counter_count];
  pg_atomic_uint64 last_worker_round;
  pg_atomic_uint64 stats_reset;
};

// This backend's row, once its first event found or claimed it. A backend
// never changes database and its database cannot be dropped under it, so the
// pointer stays valid for the backend's life.
extern DatabaseCounters *this_database;

// Finds or claims this database's row and counts there; does nothing when
// shared memory is absent (not preloaded) or not yet attached.
void count_slow(Counter counter, uint64 amount);

// The one call per event in the key-store code paths.
inline void count(Counter counter, uint64 amount = 1) {
  if (likely(this_database != nullptr))
    pg_atomic_fetch_add_u64(&this_database->counters[static_cast<int>(counter)], amount);
  else
    count_slow(counter, amount);
}

inline void count_claim(ClaimKind kind) { count(static_cast<Counter>(static_cast<int>(kind))); }

// For the background worker, once per round, in the database it is connected
// to: the round and when it ended. (The rows its batches sweep and purge it
// counts with count() after each batch, as the batch commits.)
void count_worker_round(TimestampTz round_end);

// The table in shared memory: its size, and attaching it (initialising it
// unless found), called by shared_memory.cpp's startup hook.
Size shared_size();
void attach_shared(void *memory, bool found);

// True when the counters exist in this server (idem was preloaded).
bool available();

// The row of database (claimed if it has none yet), or the overflow row.
// Null when not available().
DatabaseCounters *row_for(Oid database);

// Calls visit for every claimed row, then for the overflow row.
template <typename Visit>
void for_each_row(Visit &&visit);

// Zeroes a row's counters and stamps its stats_reset with now.
void reset_row(DatabaseCounters *row, TimestampTz now);

// All rows: the implementation's table, exposed for for_each_row.
DatabaseCounters *rows_begin();
DatabaseCounters *overflow_row();

template <typename Visit>
void for_each_row(Visit &&visit) {
  DatabaseCounters *rows = rows_begin();
  if (rows == nullptr) return;
  for (int i = 0; i < max_databases; ++i)
    if (pg_atomic_read_u32(&rows[i].datid) != InvalidOid) visit(&rows[i]);
  visit(overflow_row());
}

}  // namespace stats
}  // namespace idem
