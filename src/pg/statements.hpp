// Every SQL statement idem runs, prepared once per backend and kept
// (SPI_keepplan); they are declared in src/pure/statements.def. Each text is
// proven, before it is first prepared, to resolve no name through
// search_path (statement_proof.hpp: PostgreSQL's raw_parser and a walk of
// the tree), so it means the same under any path, and the SECURITY DEFINER
// functions that run only these need no pinned path. A kept plan is
// analysed again under the current path whenever it differs from the one it
// was planned under; a proven text analyses the same. The lexical check of
// test/unit/statements_test.cpp runs over every text at build time too.
#pragma once

#include "pg/pg.hpp"
#include "pure/errors.hpp"
#include "pure/statement_text.hpp"

namespace idem {

// A statement's kept plan and the SPI_OK_* code its execution must return.
struct KeptStatement {
  SPIPlanPtr plan;
  int expected_result;
};
IDEM_LONGJMP_SAFE(KeptStatement);

// Prepares the statement on its first use in this backend (SPI must be
// connected: spi_session.hpp runs it) and keeps the plan.
KeptStatement kept_statement(Statement statement);

// A table of idem's (a qualified name such as idem.idempotency_request) and
// the relation a statement reads in its place: one of its shards, by OID.
struct OnRelation {
  const char *table;
  Oid relation;
};

// The statement with every whole-word name of each `names[i].table` read as
// its relation instead (the first must occur, the others may), prepared for
// this SPI connection only: a shard's plan is not kept, as shards come and
// go with moves (docs/internals.md, "On Citus"). SPI must be connected;
// SPI_finish frees the plan.
KeptStatement statement_on_relation(Statement statement, const OnRelation *names, int count);

// Raises the internal error for an SPI call that returned an unexpected
// code, with the caller as its LOCATION.
[[noreturn]] void raise_spi_failure(const char *what, int code,
                                    SourceLocation where = SourceLocation::here());

}  // namespace idem
