// The one owner of SPI connections (docs/internals.md, "SPI").
//
// SPI_finish frees everything SPI handed out: result tuples, their
// descriptor, the strings of SPI_getvalue, and whatever was palloc'd while
// connected. So callers never touch a result: they ask this module for a
// copy, which is made in the memory context that was current at
// spi_connect() (the caller's), and stays valid after spi_finish(). Every
// accessor checks the session is still connected and the row and column
// exist, and raises an internal error (P4099) instead of reading freed or
// foreign memory. pg.hpp poisons the raw SPI calls everywhere else.
//
// Plain functions over a trivially destructible struct, not RAII: Postgres
// may longjmp through the frames that hold a session, skipping destructors.
// On an error there is nothing to undo: the (sub)transaction's abort ends
// the connection.
//
// Whose search_path a statement is analysed under: the caller's, for the
// C++ engine's SECURITY DEFINER functions whose statements are proven to
// resolve no name through it (statement_proof.hpp; test/sql/61_hostile_role.sql
// checks each is pinned or proven); pg_catalog, pg_temp for idem.run_maintenance()
// (pinned) and the background worker (worker.cpp), where the one statement
// that is not proven runs. No other function of idem (the row CHECKs,
// request_hash, the stats and worker_status readers, the policy triggers)
// runs SPI.
#pragma once

#include "pg/pg.hpp"
#include "pg/statements.hpp"

namespace idem {

struct SpiSession {
  MemoryContext caller_context;  // where every copy out of a result goes
  bool connected;
};
IDEM_LONGJMP_SAFE(SpiSession);

// Connects; the current memory context becomes the session's caller context.
void spi_connect(SpiSession *session);

// Called by spi_run before each kept statement runs (one that then fails
// included), as any of them may write. The layer above that must know
// (the claim memo's count of this backend's writes, keys/backend_writes.hpp)
// sets it once, from _PG_init (src/module/module.cpp), so this layer names
// nothing above it. Unset, nothing is told.
using StatementRunHook = void (*)();
void set_statement_run_hook(StatementRunHook hook);

// Runs a kept statement (statements.hpp), checks its SPI result code and
// returns the number of rows it processed (returned, for a SELECT or
// RETURNING). Each run replaces the previous result.
uint64 spi_run(SpiSession *session, Statement statement, Datum *values, const char *nulls);

// The same on shards (statement_on_relation, statements.hpp): the
// statement reads each names[i].relation wherever it names names[i].table.
uint64 spi_run_on(SpiSession *session, Statement statement, const OnRelation *names, int count,
                  Datum *values, const char *nulls);

// The same for a read-only statement, under a snapshot taken now instead of
// the transaction's: it sees what was committed until now even inside a
// REPEATABLE READ transaction whose snapshot is older (scope_policy.cpp).
uint64 spi_run_latest(SpiSession *session, Statement statement, Datum *values, const char *nulls);

// Ends the connection; SPI frees its results. Copies made before stay.
void spi_finish(SpiSession *session);

// Copies row `row` of the last result into the caller's context and deforms
// it there: values[i] and nulls[i] for each of its natts columns (which must
// be the result's column count), valid after spi_finish.
void spi_copy_row(const SpiSession *session, uint64 row, int natts, Datum *values, bool *nulls);

// One column (numbered from 1) of row `row` of the last result:
// its text output form as a C string in the caller's context (nullptr for NULL),
char *spi_copy_text(const SpiSession *session, uint64 row, int column);
// its value copied into the caller's context,
Datum spi_copy_datum(const SpiSession *session, uint64 row, int column, bool *isnull);
// a bigint (0 for NULL),
int64 spi_int64(const SpiSession *session, uint64 row, int column, bool *isnull);
// a tid, copied by value.
ItemPointerData spi_item_pointer(const SpiSession *session, uint64 row, int column);

}  // namespace idem
