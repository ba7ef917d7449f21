// SPI's connection, execution and results: the one file that may name them
// (pg.hpp poisons them elsewhere). See spi_session.hpp.
#define IDEM_SPI_SESSION_IMPLEMENTATION 1
#include "pg/spi_session.hpp"

#include "pg/citus.hpp"
#include "pg/guard.hpp"
#include "pure/errors.hpp"

extern "C" {
#include "access/htup_details.h"
#include "utils/guc.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"
}

namespace idem {

namespace {

StatementRunHook statement_run_hook = nullptr;

// The caller misused its session: a bug in idem, reported at the caller.
[[noreturn]] void raise_misuse(const char *what, SourceLocation where = SourceLocation::here()) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::internal),
                          errmsg("idem: SPI session misused: %s", what),
                          errhint("This is a bug in idem; please report it.")));
}

// The result column `column` of row `row`, after checking that both exist
// in a result of this still-connected session.
HeapTuple result_tuple(const SpiSession *session, uint64 row, int column) {
  if (!session->connected) raise_misuse("a result read after spi_finish");
  if (SPI_tuptable == nullptr) raise_misuse("a result read from a statement that returns none");
  if (row >= SPI_processed) raise_misuse("a row read past the end of the result");
  if (column < 1 || column > SPI_tuptable->tupdesc->natts)
    raise_misuse("a column the result does not have");
  return SPI_tuptable->vals[row];
}

Form_pg_attribute column_attribute(int column) {
  return TupleDescAttr(SPI_tuptable->tupdesc, column - 1);
}

// On Citus a statement on a Citus table is planned by Citus, which may
// deparse the shard's query and analyse that text again in this backend
// (local execution of a shard this node holds, when it does not plan the
// shard's query directly: citus.enable_local_fast_path_query_optimization
// off, or a query it cannot plan so). Its deparser writes pg_catalog's
// types and functions unqualified ('x'::text, nextval(...)), so the proof
// of idem's own text (statement_proof.hpp) does not cover what runs: there
// the statement runs under the pinned search_path, as every function did
// before the proof. Returns the GUC nest level to pop, or -1 when there is
// nothing pinned. An error's abort pops the level, as it does a function's
// SET.
int pin_path_on_citus() {
  if (!citus::routes_idem_tables()) return -1;
  int level = NewGUCNestLevel();
  (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                          GUC_ACTION_SAVE, true, 0, false);
  return level;
}

void unpin_path(int level) {
  if (level >= 0) AtEOXact_GUC(true, level);
}

}  // namespace

void set_statement_run_hook(StatementRunHook hook) { statement_run_hook = hook; }

void spi_connect(SpiSession *session) {
  session->caller_context = CurrentMemoryContext;
  session->connected = false;
  int code = SPI_connect();
  if (code != SPI_OK_CONNECT) raise_spi_failure("SPI_connect", code);
  session->connected = true;
}

uint64 spi_run(SpiSession *session, Statement statement, Datum *values, const char *nulls) {
  if (!session->connected) raise_misuse("a statement run after spi_finish");
  KeptStatement kept = kept_statement(statement);
  if (statement_run_hook != nullptr) statement_run_hook();
  int pinned = pin_path_on_citus();
  int code = SPI_execute_plan(kept.plan, values, nulls, false, 0);
  unpin_path(pinned);
  if (code != kept.expected_result) raise_spi_failure("SPI_execute_plan", code);
  return SPI_processed;
}

uint64 spi_run_on(SpiSession *session, Statement statement, const OnRelation *names, int count,
                  Datum *values, const char *nulls) {
  if (!session->connected) raise_misuse("a statement run after spi_finish");
  KeptStatement prepared = statement_on_relation(statement, names, count);
  if (statement_run_hook != nullptr) statement_run_hook();
  int pinned = pin_path_on_citus();
  int code = SPI_execute_plan(prepared.plan, values, nulls, false, 0);
  unpin_path(pinned);
  if (code != prepared.expected_result) raise_spi_failure("SPI_execute_plan", code);
  return SPI_processed;
}

uint64 spi_run_latest(SpiSession *session, Statement statement, Datum *values,
                      const char *nulls) {
  if (!session->connected) raise_misuse("a statement run after spi_finish");
  KeptStatement kept = kept_statement(statement);
  // Registered for the statement's length; an error's abort releases it.
  Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
  int pinned = pin_path_on_citus();
  int code = SPI_execute_snapshot(kept.plan, values, nulls, latest, InvalidSnapshot, true, false, 0);
  unpin_path(pinned);
  UnregisterSnapshot(latest);
  if (code != kept.expected_result) raise_spi_failure("SPI_execute_snapshot", code);
  return SPI_processed;
}

void spi_finish(SpiSession *session) {
  if (!session->connected) raise_misuse("spi_finish called twice");
  session->connected = false;
  int code = SPI_finish();
  if (code != SPI_OK_FINISH) raise_spi_failure("SPI_finish", code);
}

void spi_copy_row(const SpiSession *session, uint64 row, int natts, Datum *values, bool *nulls) {
  HeapTuple tuple = result_tuple(session, row, 1);
  TupleDesc desc = SPI_tuptable->tupdesc;
  if (desc->natts != natts) {
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem: a statement returned an unexpected number of columns"),
                    errdetail("expected %d columns, got %d", natts, desc->natts),
                    errhint("This is a bug in idem; please report it.")));
  }
  MemoryContext spi_context = MemoryContextSwitchTo(session->caller_context);
  HeapTuple copy = heap_copytuple(tuple);
  heap_deform_tuple(copy, desc, values, nulls);
  MemoryContextSwitchTo(spi_context);
}

char *spi_copy_text(const SpiSession *session, uint64 row, int column) {
  HeapTuple tuple = result_tuple(session, row, column);
  // SPI_getvalue allocates in the current context: make it the caller's.
  MemoryContext spi_context = MemoryContextSwitchTo(session->caller_context);
  char *text = SPI_getvalue(tuple, SPI_tuptable->tupdesc, column);
  MemoryContextSwitchTo(spi_context);
  return text;
}

Datum spi_copy_datum(const SpiSession *session, uint64 row, int column, bool *isnull) {
  HeapTuple tuple = result_tuple(session, row, column);
  Datum value = SPI_getbinval(tuple, SPI_tuptable->tupdesc, column, isnull);
  if (*isnull) return Datum(0);
  Form_pg_attribute attribute = column_attribute(column);
  MemoryContext spi_context = MemoryContextSwitchTo(session->caller_context);
  Datum copy = datumCopy(value, attribute->attbyval, attribute->attlen);
  MemoryContextSwitchTo(spi_context);
  return copy;
}

int64 spi_int64(const SpiSession *session, uint64 row, int column, bool *isnull) {
  HeapTuple tuple = result_tuple(session, row, column);
  if (column_attribute(column)->atttypid != INT8OID)
    raise_misuse("a bigint read from another type");
  Datum value = SPI_getbinval(tuple, SPI_tuptable->tupdesc, column, isnull);
  return *isnull ? 0 : DatumGetInt64(value);
}

ItemPointerData spi_item_pointer(const SpiSession *session, uint64 row, int column) {
  HeapTuple tuple = result_tuple(session, row, column);
  if (column_attribute(column)->atttypid != TIDOID) raise_misuse("a tid read from another type");
  bool isnull;
  Datum value = SPI_getbinval(tuple, SPI_tuptable->tupdesc, column, &isnull);
  ItemPointerData tid;
  if (isnull)
    ItemPointerSetInvalid(&tid);
  else
    ItemPointerCopy(reinterpret_cast<ItemPointer>(DatumGetPointer(value)), &tid);
  return tid;
}

}  // namespace idem
