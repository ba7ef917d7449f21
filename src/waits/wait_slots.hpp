// Waking the twins that wait for a key's outcome (idem.claim_or_wait;
// docs/design.md, "Waiting for a twin").
//
// Shared memory holds a fixed table of condition variables, one per stripe;
// a key waits on the stripe its (scope, key) hashes to. The table is bounded
// and can never be full: keys that share a stripe merely wake each other, and
// a woken waiter claims again and goes back to sleep if its own key has no
// outcome yet. An owner's mark_succeeded / mark_failed notes the stripe, and
// the stripe is broadcast when (and only when) the owner's transaction
// commits: a rollback wakes no one. A prepared transaction's outcomes wake
// nobody at PREPARE (nothing is visible yet); COMMIT PREPARED, in whatever
// session runs it, wakes every stripe (wait_slots.cpp says why), and
// ROLLBACK PREPARED no one. idem.stats counts the commits that woke
// (wakeups_sent) and the claims the waiters made (wait_attempts).
//
// Without the preload, and on a hot standby (where no owner commits in this
// server), there is nothing to wake a waiter: it polls with a bounded backoff.
#pragma once

#include "pg/pg.hpp"

namespace idem::wait_slots {

// A stripe of the table, from the key's scope and name.
uint32 stripe_of(const text *scope, const text *key);

// True when waiters can sleep until woken (preloaded, not in recovery).
bool wakeups_available();

// Puts this backend on the stripe's wait list before it looks at the key, so
// that a commit between its look and its sleep still wakes it.
void prepare_to_wait(uint32 stripe);

// Sleeps until the stripe is broadcast or timeout_ms pass (interrupts are
// served: a cancel or statement_timeout raises at once). True if woken.
bool sleep(long timeout_ms);

// Takes this backend off the wait list (also done by any transaction abort).
void stop_waiting();

// Sleeps on the latch only, for the polling fallback.
void poll_sleep(long timeout_ms);

// The stripe is broadcast when the current transaction commits.
void wake_at_commit(uint32 stripe);

// Broadcasts the stripe now (a bound session's end).
void wake_now(uint32 stripe);

// Wakes every stripe after each COMMIT PREPARED (a ProcessUtility hook,
// chained to any installed before); called once, from _PG_init.
void install_commit_prepared_hook();

// The table in shared memory (shared_memory.cpp).
Size shared_size();
void attach_shared(void *memory, bool found);

}  // namespace idem::wait_slots
