// Library entry: the magic block and _PG_init.
#include "pg.hpp"
#include "settings.hpp"
#include "stats.hpp"
#include "worker.hpp"

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
  idem::define_key_store_settings();
  idem::stats::request_shared_memory();
  idem::define_worker_settings();
  idem::register_background_workers();
  MarkGUCPrefixReserved("idem");
}
}
