// The completer (docs/policy.md, Brandur's "completer"): in each worker round,
// after the sweep, keys past their scope's max_attempts are ended, then the
// abandoned keys of scopes with a completer are claimed by the worker and
// driven to their end by that function, run as its owner in a process of
// its own, connected as that role (completer_worker.cpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

struct CompleterTotals {
  uint64 exhausted;  // keys ended as too_many_attempts
  uint64 runs;       // completers called (the worker: started in this round)
  uint64 successes;  // ... that recorded an outcome (the worker: ended in this round)
  uint64 failures;   // ... that raised, timed out, recorded nothing or could not run
  bool full_batch;   // idem.batch_size keys were due: more may wait
};
IDEM_LONGJMP_SAFE(CompleterTotals);

// Runs outside any transaction, in the worker: first collects the runs that
// ended since the last round (successes and failures), then starts at most
// idem.batch_size completers (the worker pauses idem.batch_delay after a
// full batch, as after a full purge batch; the rest wait for the next
// round), without waiting for them. At most idem.completer_max_processes
// run at once, of which completer_owner_limit() of one owner; the keys of
// an owner at its limit wait, unclaimed, for a later round. Does nothing
// where idem.scope_policy does not exist (a 1.0 schema). Errors of a
// completer are logged and counted, never raised. Each run takes a
// background worker slot (max_worker_processes) while it runs; with none
// free, the round logs it and leaves the rest for the next round.
void run_completer_round(CompleterTotals *totals);

}  // namespace idem
