// A table's CHECK constraint over its whole row: `CHECK (f(t))` instead of
// `CHECK (f(t.a, t.b, ...))`. PostgreSQL reads every CHECK expression back
// from its stored text and plans it at each write statement, so a call with
// fifteen column arguments is fifteen nodes to parse and compile per write,
// a large share of a new key's cost (bench/README.md); a whole-row argument
// is one node to read. The rules stay in the column-argument functions,
// which the row functions call.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The columns of one table that its rules take, by name, in the rules'
// argument order, and what they resolved to in the row type last seen.
struct RowColumns {
  const char *const *names;
  int count;
  Oid type;            // the row type the numbers were resolved in
  uint64 identifier;   // its type cache descriptor's identifier then
  int indexes[16];     // each name's 0-based attribute index
};
IDEM_LONGJMP_SAFE(RowColumns);

// Calls `rules` with `columns` of the composite argument 0 as its arguments.
Datum call_with_row_columns(FunctionCallInfo fcinfo, RowColumns *columns,
                            Datum (*rules)(FunctionCallInfo));

}  // namespace idem
