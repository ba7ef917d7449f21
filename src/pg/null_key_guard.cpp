#include "pg/null_key_guard.hpp"

#include "pg/guard.hpp"

extern "C" {
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
}

namespace idem::null_key_guard {

namespace {

planner_hook_type previous_planner = nullptr;

// idem.citus_null_key_guard: installed while the server preloaded idem,
// so every session of the server has it from its first statement.
bool guard_in_every_session = false;

// The argument idem.citus_distribute() delegates every call by: key in
// (scope, key, ...), message_id in (consumer, message_id, ...).
constexpr int distributed_argument = 1;

// A setting Citus defines in its _PG_init: present once its library is loaded.
constexpr char citus_setting[] = "citus.shard_count";

// The function call Citus would consider delegating, as it looks for one
// (TryToDelegateFunctionCall): the only target, or the only item of FROM.
// Only calls of functions that are not built in and have the argument to
// look at. Reads fields only: this runs for every query of the server.
FuncExpr *candidate_call(Query *parse) {
  if (parse->commandType != CMD_SELECT) return nullptr;
  FuncExpr *call = nullptr;
  if (list_length(parse->targetList) == 1) {
    Expr *target = linitial_node(TargetEntry, parse->targetList)->expr;
    if (IsA(target, FuncExpr)) call = reinterpret_cast<FuncExpr *>(target);
  }
  FromExpr *from = parse->jointree;
  if (call == nullptr && from != nullptr && list_length(from->fromlist) == 1 &&
      IsA(linitial(from->fromlist), RangeTblRef)) {
    RangeTblEntry *item =
        rt_fetch(linitial_node(RangeTblRef, from->fromlist)->rtindex, parse->rtable);
    if (item->rtekind == RTE_FUNCTION && list_length(item->functions) == 1) {
      Node *function = linitial_node(RangeTblFunction, item->functions)->funcexpr;
      if (IsA(function, FuncExpr)) call = reinterpret_cast<FuncExpr *>(function);
    }
  }
  if (call == nullptr || call->funcid < FirstNormalObjectId ||
      list_length(call->args) <= distributed_argument)
    return nullptr;
  return call;
}

bool is_null_constant(Node *node) {
  node = strip_implicit_coercions(node);
  return IsA(node, Const) && reinterpret_cast<Const *>(node)->constisnull;
}

// Whether the argument is NULL once the planner has folded it: Citus looks
// at it after standard_planner, which replaces a custom plan's parameters
// by their values and evaluates immutable functions (lower(NULL)).
bool folds_to_null(Node *argument, ParamListInfo bound_params) {
  if (is_null_constant(argument)) return true;
  PlannerGlobal global = {};
  global.type = T_PlannerGlobal;
  global.boundParams = bound_params;
  PlannerInfo root = {};
  root.type = T_PlannerInfo;
  root.glob = &global;
  return is_null_constant(eval_const_expressions(&root, static_cast<Node *>(copyObjectImpl(argument))));
}

bool is_idem_function(Oid function) {
  Oid idem_schema = get_namespace_oid("idem", true);
  return OidIsValid(idem_schema) && get_func_namespace(function) == idem_schema;
}

// CASE WHEN pg_catalog.clock_timestamp() IS NULL THEN NULL END, typed as
// `argument`: the same NULL at run time, volatile for the planner.
Node *volatile_null_like(Node *argument) {
  Oid type = exprType(argument);
  Oid collation = exprCollation(argument);
  NullTest *test = makeNode(NullTest);
  test->arg = reinterpret_cast<Expr *>(makeFuncExpr(F_CLOCK_TIMESTAMP, TIMESTAMPTZOID, NIL,
                                                    InvalidOid, InvalidOid,
                                                    COERCE_EXPLICIT_CALL));
  test->nulltesttype = IS_NULL;
  test->argisrow = false;
  test->location = -1;
  CaseWhen *when = makeNode(CaseWhen);
  when->expr = reinterpret_cast<Expr *>(test);
  when->result = reinterpret_cast<Expr *>(makeNullConst(type, exprTypmod(argument), collation));
  when->location = -1;
  CaseExpr *expression = makeNode(CaseExpr);
  expression->casetype = type;
  expression->casecollid = collation;
  expression->arg = nullptr;
  expression->args = list_make1(when);
  expression->defresult = reinterpret_cast<Expr *>(makeNullConst(type, exprTypmod(argument), collation));
  expression->location = -1;
  return reinterpret_cast<Node *>(expression);
}

void keep_from_delegation(FuncExpr *call, ParamListInfo bound_params) {
  ListCell *cell = list_nth_cell(call->args, distributed_argument);
  Node *argument = static_cast<Node *>(lfirst(cell));
  Node *stripped = strip_implicit_coercions(argument);
  // A key written in the statement: the common case, decided here.
  if (IsA(stripped, Const) && !reinterpret_cast<Const *>(stripped)->constisnull) return;
  if (!is_idem_function(call->funcid) || !folds_to_null(argument, bound_params)) return;
  lfirst(cell) = volatile_null_like(argument);
}

}  // namespace

}  // namespace idem::null_key_guard

extern "C" {
static PlannedStmt *idem_null_key_planner(Query *parse, const char *query_string,
                                          int cursor_options, ParamListInfo bound_params) {
  FuncExpr *call = idem::null_key_guard::candidate_call(parse);
  if (call != nullptr)
    idem::run_guarded([call, bound_params]() -> Datum {
      idem::null_key_guard::keep_from_delegation(call, bound_params);
      return 0;
    });
  if (idem::null_key_guard::previous_planner != nullptr)
    return idem::null_key_guard::previous_planner(parse, query_string, cursor_options,
                                                  bound_params);
  return standard_planner(parse, query_string, cursor_options, bound_params);
}
}

namespace idem::null_key_guard {

void install() {
  // Citus refuses to load after a library that set planner_hook, so where
  // it is loaded at all its planner is already there, after this one. A
  // citus.* line in postgresql.conf without the library is a placeholder.
  bool citus_loaded = GetConfigOption(citus_setting, true, false) != nullptr &&
                      (GetConfigOptionFlags(citus_setting, true) & GUC_CUSTOM_PLACEHOLDER) == 0;
  if (citus_loaded) {
    previous_planner = planner_hook;
    planner_hook = idem_null_key_planner;
  }
  bool in_every_session = citus_loaded && process_shared_preload_libraries_in_progress;
  DefineCustomBoolVariable(
      "idem.citus_null_key_guard",
      "Whether every session of this server keeps Citus from delegating a call of idem's "
      "with a NULL key.",
      "On when idem is in shared_preload_libraries after citus; idem.citus_distribute() "
      "delegates idem's calls by default only where every node shows on.",
      &guard_in_every_session, in_every_session, PGC_INTERNAL,
      GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE, nullptr, nullptr, nullptr);
}

}  // namespace idem::null_key_guard
