// What each database's worker is doing and what its last round did, kept in
// shared memory so any backend can read it (idem.worker_status()).
//
// The memory exists only when idem is in shared_preload_libraries: the
// postmaster sizes it by idem.database at start (shared_memory.hpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

enum class WorkerState : int32 {
  stopped,                // not running; the launcher starts it after the restart interval
  starting,               // registered, not yet connected
  waiting_for_database,   // the configured database does not exist (or refuses connections)
  waiting_for_extension,  // connected, but idem is not installed there (yet)
  standby,                // the server is in recovery: nothing may be written
  binary_upgrade,         // pg_upgrade is running the server
  disabled,               // idem.worker_enabled = off
  idle,                   // between two rounds
  working,                // in a round
  failing,                // between two rounds, the last of which failed (RoundError)
};

// Why a round failed: the error of one of its batches (the last one, when
// several failed), cut to fit shared memory. scope is empty when the failure
// was not one scope's (the round could not go on scope by scope).
struct RoundError {
  char sqlstate[6];
  char message[256];
  char scope[128];
};

// One database's entry, as copied out of shared memory.
struct WorkerReport {
  NameData database;
  int pid;  // 0 when no worker runs for it
  WorkerState state;
  TimestampTz last_round_start;  // 0 until the first round
  TimestampTz last_round_end;
  // While state is working, what the round under way (begun at
  // last_round_start) did so far, batch by batch; otherwise what the last
  // completed round did.
  uint64 last_round_swept;
  uint64 last_round_purged;
  uint64 total_rounds;    // rounds that ended without an error
  TimestampTz last_exit;  // when its last worker process ended; 0 if none did
  // Rounds that failed, in all or for some scopes (worker.cpp, "one scope's
  // failure"). A failed round moves neither last_round_end nor total_rounds.
  uint64 failed_rounds;
  TimestampTz failing_since;  // the start of the first of the failed rounds in a row; 0: none
  RoundError last_error;      // the last failed round's; kept when the rounds succeed again
};
IDEM_LONGJMP_SAFE(WorkerReport);

// _PG_init while preloading: one entry per configured database.
void configure_worker_status(const char (*databases)[64], int count);

// The region in shared memory: its size, and attaching it (initialising it
// unless found), called by shared_memory.cpp's startup hook.
Size worker_status_shared_size();
void attach_worker_status(void *memory, bool found);

// False when idem was not preloaded (no shared memory).
bool worker_status_attached();
int worker_database_count();

void read_worker_report(int index, WorkerReport *out);

// Makes the calling process the worker of entry index; false when another
// live process already is (so a duplicate exits at once).
bool claim_worker_entry(int index, int pid);
// The worker process of entry index is ending: no pid, state stopped, exit time.
void release_worker_entry(int index);
void set_worker_state(int index, WorkerState state);
void record_round_start(int index, TimestampTz start);
// After each batch of the round under way: its totals so far.
void record_round_progress(int index, uint64 swept, uint64 purged);
// A round that ended without an error: state idle, failing_since cleared.
void record_round_end(int index, TimestampTz end, uint64 swept, uint64 purged);
// A round that failed (error): state failing; last_round_end stays.
void record_round_failure(int index, uint64 swept, uint64 purged, const RoundError &error);

}  // namespace idem
