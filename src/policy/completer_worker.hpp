// The completer's own process (completer_run.hpp): a dynamic background
// worker that connects to the database as the completer's owner, runs the
// completer in one transaction, commits, reports to the idem worker, and
// exits. Everything the completer does (its commit, deferred triggers,
// ON COMMIT actions, session settings, temp objects, WITH HOLD cursors,
// SET ROLE) happens in a session of the owner's that ends with the run.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The body behind the extern "C" entry point idem_completer_main; the
// argument is the run's dsm_handle.
void completer_main(Datum argument);

}  // namespace idem
