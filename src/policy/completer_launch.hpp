// The handoff of one key from the worker's completer round (completer.cpp)
// to the completer's own process (completer_worker.cpp): the worker's claim,
// committed together with the registration of the process; the wait for it,
// bounded by the key's lock; and what it reported. Shared by the round and
// the handoff (completer_launch.cpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// One due key, copied into the round's memory.
struct Candidate {
  Datum scope;
  Datum key;
  Datum request_hash;
  Oid completer;
};
IDEM_LONGJMP_SAFE(Candidate);

// The worker's own short transactions, one per step of the round.
void begin_transaction(const char *activity);
void end_transaction();

enum class Handoff {
  not_owned,  // a client's retry (or the attempt limit) came first
  no_slot,    // no background worker slot: nothing claimed, the key waits
  failed,     // the run could not start, raised, or ended without a result
  returned,   // the completer returned and its transaction committed
};

// Claims the key, runs its completer in a process connected as the
// function's owner, and waits for that process to stop. Outside any
// transaction, with round_context current. *fence receives the worker's
// fence, by which what the completer recorded is recognised.
Handoff hand_off(MemoryContext round_context, const Candidate &candidate, int64 *fence);

}  // namespace idem
