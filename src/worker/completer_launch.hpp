// The handoff of keys from the worker's completer round (completer.cpp) to
// the completers' own processes (completer_worker.cpp): the worker's claim,
// committed together with the registration of the process; the watch over
// the processes under way, each bounded by its deadline; and what each
// reported. The worker never waits for a completer: other scopes' sweeps,
// purges and completers go on while one runs. Shared by the round and the
// handoff (completer_launch.cpp).
#pragma once

#include "pg/pg.hpp"
#include "pg/spi_session.hpp"

namespace idem {

// One due key, copied into the round's memory.
struct Candidate {
  Datum scope;
  Datum key;
  Datum request_hash;
  Oid completer;
};
IDEM_LONGJMP_SAFE(Candidate);

// The due keys (statement completer_candidates), oldest first, at most
// `limit`: their count, and *candidates set to their copies (in the
// session's caller context). Read from each relation of the key table
// on this node in turn (keys/maintenance.hpp): on Citus from its shards
// here, so that each node runs the completers of the keys it holds and the
// coordinator, which holds none, runs none (docs/internals.md, "On Citus");
// the keys are then oldest first within each shard. SPI connected.
int load_due_keys(SpiSession *session, int32 limit, Candidate **candidates);

// Whether a key's status and failure code (read with the run's fence) are
// an outcome its completer recorded: not processing, and not the sweeper's
// 'abandoned' (which no owner may write), which a sweep after the run's
// lock ended leaves with the same fence.
inline bool outcome_status(const char *status, const char *failure_code) {
  if (strcmp(status, "processing") == 0) return false;
  return !(strcmp(status, "failed_retryable") == 0 && failure_code != nullptr &&
           strcmp(failure_code, "abandoned") == 0);
}

// The WARNING that a key's completer cannot be run (reason:
// completer_not_runnable's, completer_call.hpp; owner: the function's owner,
// InvalidOid when the function is gone). One text for the worker's round and
// idem.run_maintenance's call, which both leave the key claimed.
void warn_completer_not_runnable(const Candidate &candidate, Oid owner, const char *reason);

// The worker's own short transactions, one per step of the round.
void begin_transaction(const char *activity);
void end_transaction();

enum class Launch {
  not_owned,     // a client's retry (or the attempt limit) came first
  not_runnable,  // the function or its owner cannot run it (logged): a failed run
  owner_busy,    // its owner has completer_owner_limit() runs: nothing claimed, the key waits
  all_busy,      // idem.completer_max_processes runs: nothing claimed, the key waits
  no_slot,       // no background worker slot: nothing claimed, the key waits
  launched,      // claimed, and its process started
};

// Claims the key and starts its completer in a process connected as the
// function's owner, without waiting for it. Outside any transaction, with
// round_context current.
Launch launch_completer(MemoryContext round_context, const Candidate &candidate);

// A run whose process stopped: its key (in round_context), the worker's
// fence, by which what the completer recorded is recognised, and whether
// the completer returned and committed.
struct FinishedRun {
  Candidate candidate;
  int64 fence;
  bool returned;
};
IDEM_LONGJMP_SAFE(FinishedRun);

// Terminates every run past its deadline (the earlier of the key's lock and
// idem.completer_timeout after its start) and a grace; returns the
// milliseconds until the next run's, or -1 when none runs. Outside any
// transaction, no catalog access: the worker's main loop calls it between
// rounds, so a hanging completer is ended on time, not at the next round.
int64 watch_completers();

// One run that stopped since it was started, reported (a run that ended
// without a result is logged here), and its slot freed; false when none
// has. Outside any transaction, with round_context current.
bool collect_completer(MemoryContext round_context, FinishedRun *finished);

}  // namespace idem
