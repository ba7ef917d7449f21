// idem's shared memory: one shmem_request_hook / shmem_startup_hook pair
// (pg_stat_statements' way) that sizes and attaches every region, the
// counters (stats.hpp) and the workers' status (worker_status.hpp), chained
// to the hooks of libraries loaded before idem.
//
// The memory exists only when idem is in shared_preload_libraries; without
// the preload no hook is installed, each region's pointer stays null, and
// the functions that need it say so (SQLSTATE 55000).
#pragma once

namespace idem {

// Called from _PG_init; installs the hooks only while
// shared_preload_libraries is being processed (a no-op otherwise).
void install_shared_memory_hooks();

}  // namespace idem
