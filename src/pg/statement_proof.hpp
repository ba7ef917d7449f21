// The proof that a statement text resolves nothing through search_path:
// PostgreSQL's own raw_parser reads the text and a walk over its parse tree
// finds every name parse analysis would look up (relations, types,
// functions, operators, collations) schema-qualified, every construct that
// looks up a name the text cannot qualify (IS DISTINCT FROM, IN (...),
// LIKE, CASE x WHEN, JOIN USING, ...) absent, and every function a statement
// calls one whose body is not analysed again under the caller's path. Such a
// text means the same under any search_path, so the SECURITY DEFINER
// functions that run only proven texts need no per-call
// `SET search_path` (docs/security.md, "search_path").
//
// What is checked is what runs: statements.cpp proves each kept statement
// before SPI_prepare, once per backend, and each statement prepared for a
// shard before it is prepared. A statement that fails the proof raises P4099
// there, unless it is declared pinned-only below: such a statement runs only
// under search_path = pg_catalog, pg_temp (the background worker's), which
// is checked at each run.
#pragma once

#include "pg/pg.hpp"
#include "pure/statement_text.hpp"

namespace idem::statement_proof {

// Proves the kept statement's text before it is first prepared in this
// backend; raises P4099 when it fails and is not declared pinned-only.
void prove_kept(const StatementText &declared);

// Before each run of a kept statement: a pinned-only one raises P4099 unless
// search_path is pg_catalog, pg_temp.
void check_run(Statement statement);

// The same proof for a text prepared once (a kept statement's text with a
// shard's name in place of its table's): raises P4099 when it fails, and
// for a pinned-only statement when search_path is not the pinned one.
void prove_text(const StatementText &declared, const char *sql);

}  // namespace idem::statement_proof
