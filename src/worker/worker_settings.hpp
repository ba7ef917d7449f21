// The background worker's idem.* configuration parameters (docs/worker.md).
#pragma once

namespace idem {

struct WorkerSettings {
  char *databases;  // idem.database: comma-separated identifiers; restart only
  int naptime_s;    // idem.naptime: seconds between rounds
  int batch_size;   // idem.batch_size: rows per batch transaction
  int batch_delay_ms;  // idem.batch_delay: pause after a full batch
  bool enabled;     // idem.worker_enabled: off keeps the workers idle
  int completer_timeout_ms;     // idem.completer_timeout: the longest completer run
  int completer_max_processes;  // idem.completer_max_processes: runs at once, per worker
  int completer_max_per_owner;  // idem.completer_max_per_owner: of them, one owner's
};

extern WorkerSettings worker_settings;

// The most databases idem.database may name: each gets a worker process and a
// slot of shared memory.
constexpr int max_worker_databases = 32;

// The most completer processes one worker runs at once (the bound of
// idem.completer_max_processes): the worker keeps a slot for each.
constexpr int max_completer_processes = 32;

// How many completer processes of one owner a worker may run at once:
// idem.completer_max_per_owner, and never every slot while there are two, so
// that one owner's completers always leave a slot for the others'.
int completer_owner_limit();

// Defines the worker settings; called from _PG_init whether or not idem is
// preloaded. idem.database (a restart-only setting) exists only when idem is
// preloaded: Postgres cannot define one later.
void define_worker_settings();

// Splits idem.database into names[] (each NUL-terminated, truncated like any
// identifier) and returns how many there are; -1 when the list is malformed.
int parse_worker_databases(const char *list, char (*names)[64], int max_names);

}  // namespace idem
