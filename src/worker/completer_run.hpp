// One completer run, as the idem worker and the completer's own process
// share it: a dynamic shared memory segment per run, its handle passed as
// the process's bgw_main_arg (scope and key may be 255 characters each and
// the recovery point any length, too much for bgw_extra).
//
// The worker fills the segment while its claim of the key is still
// uncommitted, registers the process, and commits; only then does it set
// phase `go` (or `skip` when the commit did not happen), so the completer
// never acts on a claim that is not there. The completer answers by setting
// phase `done` after writing its result.
#pragma once

#include "pg/pg.hpp"

extern "C" {
#include "storage/proc.h"
#include "storage/spin.h"
}

namespace idem {

enum class CompleterPhase : int32 {
  waiting,  // the worker's claim is not committed yet
  go,       // committed: connect and run
  skip,     // the worker gave the run up: exit without connecting
  done,     // the completer wrote its result
};

enum class CompleterResult : int32 {
  none,      // no result written (the process died, or was terminated)
  returned,  // the completer returned and its transaction committed
  raised,    // the completer, or its commit, raised (logged by the completer process)
  not_run,   // the function changed since the worker's checks (logged)
};

struct CompleterRun {
  slock_t mutex;           // guards phase and process
  CompleterPhase phase;
  PGPROC *process;         // the completer's process, once it waits for `go`
  // Written before the process is registered, read after `go`.
  Oid database;
  Oid owner;               // the role it connects as
  Oid function;
  int64 fence;
  int32 attempt_count;
  TimestampTz deadline;    // the key's lock or idem.completer_timeout, the earlier
  bool recovery_point_null;
  uint32 scope_offset;     // NUL-terminated texts after the struct
  uint32 key_offset;
  uint32 recovery_point_offset;
  // Written by the completer before phase `done`.
  CompleterResult result;
  char sqlstate[6];
  char message[512];       // cut on a character boundary
};

inline char *completer_run_text(CompleterRun *run, uint32 offset) {
  return reinterpret_cast<char *>(run) + offset;
}

}  // namespace idem
