// idem.* configuration parameters.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The check hook of every retention setting in seconds (idem.retention,
// idem.inbox_retention, idem.outbox_retention): -1 keeps rows forever, and 0,
// which would expire them at once, is refused with the errdetail `detail`.
template <const char *detail>
bool check_retention(int *value, void **, GucSource) {
  if (*value != 0) return true;
  GUC_check_errdetail("%s", detail);
  return false;
}

struct Settings {
  int lock_timeout_ms;  // idem.lock_timeout
  int retention_s;      // idem.retention; -1: keys never expire
  bool bind_lock_to_session;  // idem.bind_lock_to_session (session_binding.hpp)
};

extern Settings settings;

// Defines the key-store settings; called from _PG_init.
void define_key_store_settings();

}  // namespace idem

// ==== worker: settings of the background worker (docs/worker.md) ====
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
