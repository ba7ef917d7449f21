// The background worker: a launcher, connected to no database, starts one
// maintenance worker per database of idem.database once that database exists
// and restarts it when it ends. See launcher.cpp and worker.cpp.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// How long a worker that ended stays down before the launcher starts it
// again; also the launcher's own bgw_restart_time.
constexpr int worker_restart_interval_s = 5;

// _PG_init: registers the launcher and asks for the status memory, but only
// while shared_preload_libraries is being processed (a no-op otherwise).
void register_background_workers();

// The bodies behind the extern "C" entry points idem_launcher_main and
// idem_worker_main (the argument is the database's index in idem.database).
void launcher_main(Datum argument);
void worker_main(Datum argument);

}  // namespace idem
