// SPI's plan calls: this file prepares and keeps; spi_session.cpp executes.
// Each statement comes with its text, argument types and the SPI_OK_* code
// its execution returns from its declaration (src/pure/statements.def).
#define IDEM_KEPT_STATEMENTS_IMPLEMENTATION 1
#include "pg/statements.hpp"

#include "pg/guard.hpp"
#include "pg/statement_proof.hpp"
#include "pure/errors.hpp"

namespace idem {

namespace {

// Type OIDs and SPI codes stay on this side of the boundary: the declarations
// (src/pure/statements.def) name them portably.
Oid type_oid(sql_type::SqlType type) {
  switch (type) {
    case sql_type::text: return TEXTOID;
    case sql_type::int4: return INT4OID;
    case sql_type::int8: return INT8OID;
    case sql_type::boolean: return BOOLOID;
    case sql_type::timestamptz: return TIMESTAMPTZOID;
    case sql_type::interval: return INTERVALOID;
    case sql_type::jsonb: return JSONBOID;
    case sql_type::oid: return OIDOID;
    case sql_type::text_array: return TEXTARRAYOID;
    case sql_type::int8_array: return INT8ARRAYOID;
    case sql_type::tid_array: return TIDARRAYOID;
  }
  pg_unreachable();
}

int spi_ok_code(SpiOk result) {
  switch (result) {
    case SpiOk::SELECT: return SPI_OK_SELECT;
    case SpiOk::INSERT_RETURNING: return SPI_OK_INSERT_RETURNING;
    case SpiOk::UPDATE: return SPI_OK_UPDATE;
    case SpiOk::UPDATE_RETURNING: return SPI_OK_UPDATE_RETURNING;
    case SpiOk::DELETE: return SPI_OK_DELETE;
    case SpiOk::DELETE_RETURNING: return SPI_OK_DELETE_RETURNING;
  }
  pg_unreachable();
}

// Kept plans live for the backend's life; Postgres replans them by name
// when the objects behind them change (for example DROP/CREATE EXTENSION).
SPIPlanPtr kept_plans[statement_count];

SPIPlanPtr plan_for(Statement statement) {
  int index = static_cast<int>(statement);
  if (kept_plans[index] == nullptr) {
    const StatementText &declared = statement_text(statement);
    statement_proof::prove_kept(declared);
    Oid argtypes[max_statement_args];
    for (int i = 0; i < declared.args.count; ++i) argtypes[i] = type_oid(declared.args.types[i]);
    SPIPlanPtr plan = SPI_prepare(declared.sql, declared.args.count, argtypes);
    if (plan == nullptr) raise_spi_failure("SPI_prepare", SPI_result);
    int kept = SPI_keepplan(plan);
    if (kept != 0) raise_spi_failure("SPI_keepplan", kept);
    kept_plans[index] = plan;
  }
  return kept_plans[index];
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '"';
}

// sql with each whole-word occurrence of table replaced by replacement;
// *replaced counts them.
char *replace_table(const char *sql, const char *table, const char *replacement, int *replaced) {
  StringInfoData out;
  initStringInfo(&out);
  size_t length = strlen(table);
  *replaced = 0;
  for (const char *at = sql; *at != '\0';) {
    bool starts = at == sql || !identifier_char(at[-1]);
    if (starts && strncmp(at, table, length) == 0 && !identifier_char(at[length])) {
      appendStringInfoString(&out, replacement);
      at += length;
      ++*replaced;
    } else {
      appendStringInfoChar(&out, *at++);
    }
  }
  return out.data;
}

const char *qualified_name(Oid relation) {
  char *name = get_rel_name(relation);
  Oid namespace_oid = get_rel_namespace(relation);
  if (name == nullptr || !OidIsValid(namespace_oid))
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem: relation %u to maintain is gone", relation)));
  return quote_qualified_identifier(get_namespace_name(namespace_oid), name);
}

}  // namespace

KeptStatement statement_on_relation(Statement statement, const OnRelation *names, int count) {
  const StatementText &declared = statement_text(statement);
  const char *sql = declared.sql;
  for (int i = 0; i < count; ++i) {
    int replaced;
    sql = replace_table(sql, names[i].table, qualified_name(names[i].relation), &replaced);
    if (i == 0 && replaced == 0)
      ereport(ERROR, (errcode_of(sqlstate::internal),
                      errmsg("idem: statement %s run on a shard does not name %s", declared.name,
                             names[i].table),
                      errhint("This is a bug in idem; please report it.")));
  }
  statement_proof::prove_text(declared, sql);
  Oid argtypes[max_statement_args];
  for (int i = 0; i < declared.args.count; ++i) argtypes[i] = type_oid(declared.args.types[i]);
  SPIPlanPtr plan = SPI_prepare(sql, declared.args.count, argtypes);
  if (plan == nullptr) raise_spi_failure("SPI_prepare", SPI_result);
  return KeptStatement{plan, spi_ok_code(declared.result)};
}

void raise_spi_failure(const char *what, int code, SourceLocation where) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::internal), errmsg("idem: %s failed", what),
                          errdetail("SPI result: %s", SPI_result_code_string(code)),
                          errhint("This is a bug in idem; please report it.")));
}

KeptStatement kept_statement(Statement statement) {
  SPIPlanPtr plan = plan_for(statement);
  statement_proof::check_run(statement);
  return KeptStatement{plan, spi_ok_code(statement_text(statement).result)};
}

}  // namespace idem
