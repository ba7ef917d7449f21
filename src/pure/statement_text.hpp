// The kept statements, without Postgres. Each is declared once, in
// src/pure/statements.def (which says how), with its name, the SPI_OK_* code
// its execution returns, its argument types and its text; from that list
// come the enum below, the table of texts (statement_text.cpp) and what
// src/pg/statements.cpp prepares (argument types, expected SPI code).
// test/unit/statements_test.cpp checks every text against the search_path
// rule and against docs/kept-statements.sql, which prints them all
// (`make kept-statements` writes it again).
#pragma once

namespace idem {

// Parameters shared by the claim statements.
enum ClaimParam {
  claim_scope,
  claim_key,
  claim_request_hash,
  claim_claimed_by,
  claim_now,
  claim_lock_timeout,
  claim_retention,  // NULL: never expires
  claim_seen_fence,
  claim_seen_status,
  claim_bound_session,  // this session's token when idem.bind_lock_to_session is on
  claim_dead_session,   // the dead session the observed row was bound to, or NULL
  claim_new_fence,      // a takeover's or new generation's fence (keys/fence.hpp)
  claim_param_count,
};

// ClaimParam's types, for every statement that runs a claim's write
// (statement_text.cpp checks that there is one per ClaimParam).
#define IDEM_CLAIM_ARGS \
  (text, text, text, text, timestamptz, interval, interval, int8, text, int8, int8, int8)

// Columns of the claim statements' result rows.
enum ClaimColumn {
  col_inserted = 1,
  col_status,
  col_same_hash,
  col_lock_expired,
  col_expired,
  col_fence,  // first column copied into idem.claim (after kind)
  col_attempt_count,
  col_recovery_point,
  col_response_code,
  col_response_body,
  col_result_ref_type,
  col_result_ref_id,
  col_failure_code,
  col_failure_message,
  col_locked_until,
  col_expires_at,  // last column copied into idem.claim
  col_bound_session,  // the session the owner bound the key to, or NULL
};

// Columns of Statement::key_fence_and_status.
enum KeyFenceColumn { key_fence_column = 1, key_status_column, key_failure_code_column };

// The statements' argument types, by their SQL names, as statements.def
// lists them (src/pg/statements.cpp maps each to its type OID). A namespace
// of their own: Postgres's headers name C types text and int8.
namespace sql_type {
enum SqlType : unsigned char {
  text,
  int4,
  int8,
  boolean,
  timestamptz,
  interval,
  jsonb,
  oid,
  text_array,
  int8_array,
  tid_array,
};
}  // namespace sql_type

constexpr int max_statement_args = 12;

struct ArgTypes {
  int count;
  sql_type::SqlType types[max_statement_args];
};

// The SPI_OK_* code a statement's execution returns, named as the code
// without its prefix (src/pg/statements.cpp maps each to it).
enum class SpiOk : unsigned char {
  SELECT,
  INSERT_RETURNING,
  UPDATE,
  UPDATE_RETURNING,
  DELETE,
  DELETE_RETURNING,
};

// Every statement, in the order statements.def declares them.
enum class Statement {
#define IDEM_STATEMENT(name, result, args, sql) name,
#include "pure/statements.def"
};

constexpr int statement_count = 0
#define IDEM_STATEMENT(name, result, args, sql) +1
#include "pure/statements.def"
    ;

struct StatementText {
  Statement statement;  // its index in statement_texts
  const char *name;     // the enumerator's name
  const char *sql;      // the text SPI_prepare receives
  ArgTypes args;        // $1, $2, ...
  SpiOk result;
};

// Every statement, in Statement order.
extern const StatementText statement_texts[statement_count];

inline const StatementText &statement_text(Statement statement) {
  return statement_texts[static_cast<int>(statement)];
}

// The variant of a statement for a key table with or without 1.1's
// bound_session column (catalog_cache::key_table_has_binding): the
// statements.def entries declared IDEM_STATEMENT_ON_10.
constexpr Statement for_key_table(Statement statement, bool has_binding) {
  if (has_binding) return statement;
  switch (statement) {
#define IDEM_STATEMENT(name, result, args, sql)
#define IDEM_STATEMENT_ON_10(name, base, result, args, sql) \
  case Statement::base: return Statement::name;
#include "pure/statements.def"
    default: return statement;
  }
}

}  // namespace idem
