// The table of kept statements, built from their declarations
// (src/pure/statements.def): each text is a constant the compiler computes,
// written out or derived by a rule of sql_text.hpp, and checked here against
// the argument types declared with it.
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

#include "pure/sql_text.hpp"

namespace idem {

namespace {

template <class... Types>
constexpr ArgTypes arg_types(Types... types) {
  static_assert(sizeof...(Types) <= max_statement_args, "more arguments than max_statement_args");
  return ArgTypes{static_cast<int>(sizeof...(Types)), {types...}};
}

constexpr bool same_arg_types(const ArgTypes &a, const ArgTypes &b) {
  if (a.count != b.count) return false;
  for (int i = 0; i < a.count; ++i)
    if (a.types[i] != b.types[i]) return false;
  return true;
}

// Each statement's argument types, by its name. The declarations name the
// types bare, as SQL does; sql_type keeps those names out of idem.
namespace statement_args {
using namespace sql_type;
constexpr ArgTypes claim_args = arg_types IDEM_CLAIM_ARGS;
#define IDEM_STATEMENT(name, result, args, sql) constexpr ArgTypes name = arg_types args;
#include "pure/statements.def"
}  // namespace statement_args

static_assert(statement_args::claim_args.count == claim_param_count,
              "IDEM_CLAIM_ARGS: one type per ClaimParam");

// Each statement's text, by its name: a derived text names the earlier
// texts it is derived from.
namespace statement_sql {
#define IDEM_STATEMENT(name, result, args, sql) constexpr auto name = sql_text::written(sql);
#include "pure/statements.def"
}  // namespace statement_sql

// A text uses no parameter it has no type for; a statement that replaces
// another on a 1.0 key table takes the same arguments (its caller passes the
// same values).
#define IDEM_STATEMENT(name, result, args, sql)                                         \
  static_assert(sql_text::highest_parameter(statement_sql::name) <= statement_args::name.count, \
                #name ": a parameter past its argument types");
#define IDEM_STATEMENT_ON_10(name, base, result, args, sql)                       \
  IDEM_STATEMENT(name, result, args, sql)                                         \
  static_assert(same_arg_types(statement_args::name, statement_args::base), \
                #name ": not the arguments of " #base);
#include "pure/statements.def"

}  // namespace

const StatementText statement_texts[statement_count] = {
#define IDEM_STATEMENT(name, result, args, sql) \
  {Statement::name, #name, statement_sql::name.chars, statement_args::name, SpiOk::result},
#include "pure/statements.def"
};

}  // namespace idem
