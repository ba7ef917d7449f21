// Library entry: the magic block and _PG_init.
#include "pg.hpp"
#include "settings.hpp"

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
  idem::define_key_store_settings();
  MarkGUCPrefixReserved("idem");
}
}
