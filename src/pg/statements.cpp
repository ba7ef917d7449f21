// SPI's plan calls: this file prepares and keeps; spi_session.cpp executes.
// The texts are in the *_statements.cpp files (src/pure/statement_text.hpp);
// here each statement gets its argument types and the SPI_OK_* code its
// execution returns.
#define IDEM_KEPT_STATEMENTS_IMPLEMENTATION 1
#include "pg/statements.hpp"

#include "pg/guard.hpp"
#include "pure/errors.hpp"

namespace idem {

namespace {

constexpr int max_params = 11;

struct StatementSpec {
  Statement statement;
  int expected_result;  // SPI_OK_* code
  int nargs;
  Oid argtypes[max_params];
};

// ClaimParam's types, shared by every statement that runs a claim's write.
#define CLAIM_PARAMS                                                                     \
  claim_param_count, {                                                                   \
    TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INTERVALOID, INTERVALOID, INT8OID, \
        TEXTOID, INT8OID, INT8OID                                                        \
  }

constexpr StatementSpec specs[] = {
    {Statement::claim_insert, SPI_OK_INSERT_RETURNING, CLAIM_PARAMS},
    {Statement::claim_take_over, SPI_OK_UPDATE_RETURNING, CLAIM_PARAMS},
    {Statement::claim_regenerate, SPI_OK_UPDATE_RETURNING, CLAIM_PARAMS},
    {Statement::mark_succeeded, SPI_OK_UPDATE_RETURNING, 8,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, TEXTOID, TEXTOID}},
    {Statement::mark_failed, SPI_OK_UPDATE_RETURNING, 9,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, BOOLOID, TEXTOID, TEXTOID, INT4OID, JSONBOID}},
    {Statement::set_recovery_point, SPI_OK_UPDATE, 5,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID}},
    {Statement::key_fence_and_status, SPI_OK_SELECT, 2, {TEXTOID, TEXTOID}},
    {Statement::purge_expired, SPI_OK_DELETE, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::purge_candidates, SPI_OK_SELECT, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::sweep_stale, SPI_OK_SELECT, 3, {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID}},
    {Statement::sweep_rows, SPI_OK_UPDATE, 2, {TIMESTAMPTZOID, TIDARRAYOID}},
    {Statement::lookup_key, SPI_OK_SELECT, 2, {TEXTOID, TEXTOID}},
    {Statement::evict_key, SPI_OK_DELETE_RETURNING, 3, {TEXTOID, TEXTOID, BOOLOID}},
    {Statement::force_expire_key, SPI_OK_UPDATE_RETURNING, 4,
     {TEXTOID, TEXTOID, BOOLOID, TIMESTAMPTZOID}},
    {Statement::purge_consumed, SPI_OK_SELECT, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::purge_published, SPI_OK_SELECT, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::extend_lock, SPI_OK_UPDATE_RETURNING, 5,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INTERVALOID}},
    {Statement::claim_insert_10, SPI_OK_INSERT_RETURNING, CLAIM_PARAMS},
    {Statement::claim_take_over_10, SPI_OK_UPDATE_RETURNING, CLAIM_PARAMS},
    {Statement::claim_regenerate_10, SPI_OK_UPDATE_RETURNING, CLAIM_PARAMS},
    {Statement::sweep_stale_10, SPI_OK_UPDATE, 3, {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID}},
    {Statement::claim_give_up, SPI_OK_UPDATE_RETURNING, CLAIM_PARAMS},
    {Statement::policy_load, SPI_OK_SELECT, 0, {}},
    {Statement::exhaust_attempts, SPI_OK_UPDATE, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::completer_candidates, SPI_OK_SELECT, 2, {TIMESTAMPTZOID, INT4OID}},
    {Statement::completer_claim, SPI_OK_SELECT, 3, {TEXTOID, TEXTOID, TEXTOID}},
    {Statement::session_temp_objects, SPI_OK_SELECT, 0, {}},
    {Statement::inbox_insert, SPI_OK_INSERT_RETURNING, 5,
     {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}},
    {Statement::inbox_set_result, SPI_OK_UPDATE, 5,
     {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}},
    {Statement::outbox_insert, SPI_OK_INSERT_RETURNING, 9,
     {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID,
      TIMESTAMPTZOID}},
    {Statement::outbox_existing, SPI_OK_SELECT, 4, {TEXTOID, TEXTOID, TEXTOID, JSONBOID}},
    {Statement::outbox_published, SPI_OK_UPDATE, 3, {INT8OID, INT8OID, TIMESTAMPTZOID}},
    {Statement::outbox_event_state, SPI_OK_SELECT, 1, {INT8OID}},
    {Statement::outbox_lease, SPI_OK_UPDATE_RETURNING, 4,
     {TIMESTAMPTZOID, INTERVALOID, TEXTARRAYOID, INT4OID}},
    {Statement::stored_answer, SPI_OK_SELECT, 2, {TEXTOID, TEXTOID}},
    {Statement::release_key, SPI_OK_DELETE_RETURNING, 4,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}},
    {Statement::owner_load, SPI_OK_SELECT, 1, {OIDOID}},
    {Statement::outbox_lease_11, SPI_OK_UPDATE_RETURNING, 4,
     {TIMESTAMPTZOID, INTERVALOID, TEXTARRAYOID, INT4OID}},
    {Statement::scopes_to_sweep, SPI_OK_SELECT, 0, {}},
    {Statement::scopes_to_purge, SPI_OK_SELECT, 1, {TIMESTAMPTZOID}},
    {Statement::sweep_stale_in_scope, SPI_OK_SELECT, 4,
     {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID, TEXTOID}},
    {Statement::sweep_stale_10_in_scope, SPI_OK_UPDATE, 4,
     {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID, TEXTOID}},
    {Statement::purge_expired_in_scope, SPI_OK_DELETE, 3, {TIMESTAMPTZOID, INT4OID, TEXTOID}},
    {Statement::purge_candidates_in_scope, SPI_OK_SELECT, 3, {TIMESTAMPTZOID, INT4OID, TEXTOID}},
};
#undef CLAIM_PARAMS

constexpr bool specs_in_statement_order() {
  for (int i = 0; i < statement_count; ++i)
    if (static_cast<int>(specs[i].statement) != i) return false;
  return true;
}
static_assert(sizeof specs / sizeof specs[0] == statement_count, "one spec per Statement");
static_assert(specs_in_statement_order(), "specs in Statement order");

// Kept plans live for the backend's life; Postgres replans them by name
// when the objects behind them change (for example DROP/CREATE EXTENSION).
SPIPlanPtr kept_plans[statement_count];

SPIPlanPtr plan_for(Statement statement) {
  int index = static_cast<int>(statement);
  if (kept_plans[index] == nullptr) {
    const StatementSpec &spec = specs[index];
    SPIPlanPtr plan = SPI_prepare(statement_text(statement).sql, spec.nargs,
                                  const_cast<Oid *>(spec.argtypes));
    if (plan == nullptr) raise_spi_failure("SPI_prepare", SPI_result);
    int kept = SPI_keepplan(plan);
    if (kept != 0) raise_spi_failure("SPI_keepplan", kept);
    kept_plans[index] = plan;
  }
  return kept_plans[index];
}

}  // namespace

void raise_spi_failure(const char *what, int code, SourceLocation where) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::internal), errmsg("idem: %s failed", what),
                          errdetail("SPI result: %s", SPI_result_code_string(code)),
                          errhint("This is a bug in idem; please report it.")));
}

Statement for_key_table(Statement statement, bool has_binding) {
  if (has_binding) return statement;
  switch (statement) {
    case Statement::claim_insert: return Statement::claim_insert_10;
    case Statement::claim_take_over: return Statement::claim_take_over_10;
    case Statement::claim_regenerate: return Statement::claim_regenerate_10;
    case Statement::sweep_stale: return Statement::sweep_stale_10;
    default: return statement;
  }
}

KeptStatement kept_statement(Statement statement) {
  return KeptStatement{plan_for(statement), specs[static_cast<int>(statement)].expected_result};
}

}  // namespace idem
