// Library entry: the magic block and _PG_init.
#include "pg.hpp"
#include "settings.hpp"
#include "stats.hpp"

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
  idem::define_key_store_settings();
  idem::stats::request_shared_memory();
  MarkGUCPrefixReserved("idem");
}
}
