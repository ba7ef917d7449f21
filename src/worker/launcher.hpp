// The background worker: a launcher, connected to no database, starts one
// maintenance worker per database of idem.database once that database exists
// and restarts it when it ends. See launcher.cpp and worker.cpp.
#pragma once

namespace idem {

// _PG_init: registers the launcher and asks for the status memory, but only
// while shared_preload_libraries is being processed (a no-op otherwise).
void register_background_workers();

}  // namespace idem
