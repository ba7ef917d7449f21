// The background worker's idem.* configuration parameters (docs/worker.md).
#pragma once

namespace idem {

struct WorkerSettings {
  char *databases;  // idem.database: comma-separated identifiers; restart only
  int naptime_s;    // idem.naptime: seconds between rounds
  int batch_size;   // idem.batch_size: rows per batch transaction
  int batch_delay_ms;  // idem.batch_delay: pause after a full batch
  bool enabled;     // idem.worker_enabled: off keeps the workers idle
};

extern WorkerSettings worker_settings;

// The most databases idem.database may name: each gets a worker process and a
// slot of shared memory.
constexpr int max_worker_databases = 32;

// Defines the worker settings; called from _PG_init whether or not idem is
// preloaded. idem.database (a restart-only setting) exists only when idem is
// preloaded: Postgres cannot define one later.
void define_worker_settings();

// Splits idem.database into names[] (each NUL-terminated, truncated like any
// identifier) and returns how many there are; -1 when the list is malformed.
int parse_worker_databases(const char *list, char (*names)[64], int max_names);

}  // namespace idem
