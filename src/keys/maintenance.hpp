// One batch of maintenance, shared by the SQL functions (idem.sweep_stale,
// idem.purge_expired) and the background worker, so both run the very same
// statement.
#pragma once

#include "pg/pg.hpp"
#include "pg/spi_session.hpp"

namespace idem {

// Runs one bounded batch of Statement::sweep_stale or Statement::purge_expired
// at the current time, in the connected session, inside the caller's
// transaction. Returns the number of rows changed; fewer than limit means the
// backlog is done (for now). May raise an error.
uint64 run_maintenance_batch(SpiSession *session, Statement statement, int32 limit);

// Counts `rows` a maintenance statement changed in idem.stats, under the
// statement's counter (rows_swept, rows_purged, messages_purged,
// events_purged): every caller that drives maintenance counts through here.
void count_maintenance_rows(Statement statement, uint64 rows);

}  // namespace idem
