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

// Reads the rows one relation's statement left in the session (before the
// next relation's statement replaces them); `context` is the caller's.
using RelationRows = void (*)(SpiSession *session, uint64 rows, void *context);

// A statement that writes or reads key rows in a batch ($2: its limit, set
// here in params[1]) over every relation of the key table on this node in
// turn, up to `limit` rows in all: the table itself, or on Citus its shards
// here (docs/internals.md, "On Citus"), the local shard of the reference
// table idem.scope_policy read in that table's place beside each. Each
// relation's rows go to `take` when it is given. Returns the rows it
// processed.
uint64 run_on_key_relations(SpiSession *session, Statement statement, Datum *params, int32 limit,
                            RelationRows take = nullptr, void *context = nullptr);

// The shards of the Citus table `table` that this node holds
// (idem.local_relations; none on the coordinator): their count, and
// *shards (palloc'd in the current context) set to their OIDs.
uint64 local_shards(SpiSession *session, Oid table, Oid **shards);

// idem.purge_consumed's batch where the inbox is a Citus table
// (citus::is_citus_table): on each shard of it this node holds, up to
// `limit` rows in all; params as the message purges take them.
uint64 purge_consumed_on_shards(SpiSession *session, Datum *params, int32 limit);

// The same, for the keys of one scope only: how a worker round goes on when
// a batch over all scopes failed (worker.cpp). Only the key stages
// (Statement::sweep_stale, Statement::purge_expired) have this form.
uint64 run_maintenance_batch_in_scope(SpiSession *session, Statement statement, int32 limit,
                                      const char *scope);

// The scopes that may have work for a key stage, for the scope-by-scope
// round: their count, and *scopes (allocated in the session's caller
// context, valid after spi_finish) set to their names.
uint64 scopes_with_work(SpiSession *session, Statement statement, char ***scopes);

// Maintenance writes, and where a transaction may not write (READ ONLY, a
// hot standby) this refuses with 25006 before anything runs, as the executor
// would refuse its statements, naming the SQL function of the stage
// (idem.purge_expired(), idem.sweep_stale(), idem.purge_consumed(),
// idem.purge_published()). Every maintenance batch starts with it, the
// message purges' too (message_maintenance.cpp).
void require_writable_for_maintenance(Statement statement);

// Counts `rows` a maintenance statement changed in idem.stats, under the
// statement's counter (rows_swept, rows_purged, messages_purged,
// events_purged): every caller that drives maintenance counts through here.
void count_maintenance_rows(Statement statement, uint64 rows);

}  // namespace idem
