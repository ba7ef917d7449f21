// Library entry: the magic block and _PG_init, the top of src/ (as pg_cron.c
// and pgduckdb.cpp are theirs): it includes the subsystems and wires them
// together (settings, background workers, shared memory, hooks); nothing
// includes it.
#include "keys/backend_writes.hpp"
#include "keys/bound_commit.hpp"
#include "messages/message_maintenance.hpp"
#include "module/shared_memory.hpp"
#include "pg/null_key_guard.hpp"
#include "pg/pg.hpp"
#include "pg/settings.hpp"
#include "pg/spi_session.hpp"
#include "waits/wait_slots.hpp"
#include "worker/launcher.hpp"
#include "worker/worker_settings.hpp"

extern "C" {

// The library's version: that of the newest extension script it serves
// (sql/idem--*.sql, idem.control's default_version once released).
IDEM_MODULE_MAGIC("1.3");

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
  // Every kept statement may write: the claim memo counts them.
  idem::set_statement_run_hook(idem::backend_writes::note);
  idem::define_key_store_settings();
  idem::define_worker_settings();
  idem::define_message_settings();
  // Reads idem.database, which sizes the workers' status in shared memory:
  // before the hooks that allocate it.
  idem::register_background_workers();
  idem::install_shared_memory_hooks();
  idem::wait_slots::install_commit_prepared_hook();
  idem::null_key_guard::install();
  idem::bound_commit::install();
  MarkGUCPrefixReserved("idem");
}
}
