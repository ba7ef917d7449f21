// See compiled_checks.hpp. Every function here is a Postgres-calling frame
// with trivially destructible locals only; nothing throws.
#include "compiled_checks.hpp"

extern "C" {
#include "access/transam.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/inval.h"
#include "utils/rel.h"
}

#include "guard.hpp"

namespace idem::compiled_checks {

namespace {

// One table's compiled constraints, in the relcache's order (the order
// ExecRelCheck evaluates them and names the one that failed). states is
// null when the table's constraints are not all plain built-in logic: then
// the executor builds its own, as always.
struct Compiled {
  Oid relid;
  int count;
  ExprState **states;
  MemoryContext context;
  bool stale;  // the table's relcache entry was invalidated since
};

Compiled compiled = {InvalidOid, 0, nullptr, nullptr, true};

// Set by execute_plan for exactly the next ExecutorStart: the one of the
// statement it runs, not those a trigger or function inside it may start.
bool lend_to_next_executor = false;

ExecutorStart_hook_type previous_executor_start = nullptr;

bool is_user_defined(Oid function_id, void *) { return function_id >= FirstNormalObjectId; }

bool calls_user_defined_function(Node *node, void *context) {
  if (node == nullptr) return false;
  if (check_functions_in_node(node, is_user_defined, context)) return true;
  // PostgreSQL 15 declares the walker as an unprototyped C function pointer
  // (through void (*)(), the one cast GCC accepts between function types).
  auto walker = reinterpret_cast<void (*)()>(calls_user_defined_function);
  return expression_tree_walker(node, reinterpret_cast<bool (*)()>(walker), context);
}

// The old compilation may still be lent to a statement running in this
// transaction: it is freed when the transaction ends, not now.
void retire_compiled() {
  if (compiled.context != nullptr) MemoryContextSetParent(compiled.context, TopTransactionContext);
  compiled = {InvalidOid, 0, nullptr, nullptr, true};
}

// Compiles rel's constraints into a context that outlives the statement. A
// constraint that calls only built-in functions cannot run a statement of
// its own, so a compiled state is never evaluated re-entrantly; any other
// constraint makes the table keep Postgres's own per-statement build. The
// context starts under the transaction, so an error half way leaves nothing.
void compile(Relation rel) {
  retire_compiled();
  const TupleConstr *constr = rel->rd_att->constr;
  MemoryContext context = AllocSetContextCreate(TopTransactionContext, "idem compiled checks",
                                                ALLOCSET_SMALL_SIZES);
  MemoryContext caller = MemoryContextSwitchTo(context);
  ExprState **states = static_cast<ExprState **>(palloc(constr->num_check * sizeof(ExprState *)));
  bool usable = true;
  for (int i = 0; i < constr->num_check && usable; ++i) {
    Expr *tree = expression_planner(static_cast<Expr *>(stringToNode(constr->check[i].ccbin)));
    usable = !calls_user_defined_function(reinterpret_cast<Node *>(tree), nullptr);
    if (usable) states[i] = ExecInitExpr(tree, nullptr);
  }
  MemoryContextSwitchTo(caller);
  if (usable) {
    MemoryContextSetParent(context, CacheMemoryContext);
  } else {
    MemoryContextDelete(context);
    context = nullptr;
    states = nullptr;
  }
  compiled = {RelationGetRelid(rel), constr->num_check, states, context, false};
}

void lend(EState *estate) {
  ListCell *cell;
  foreach (cell, estate->es_opened_result_relations) {
    ResultRelInfo *result = static_cast<ResultRelInfo *>(lfirst(cell));
    Relation rel = result->ri_RelationDesc;
    const TupleConstr *constr = rel->rd_att->constr;
    // A count that disagrees with pg_class is an error ExecRelCheck reports.
    if (constr == nullptr || constr->num_check == 0 || result->ri_ConstraintExprs != nullptr ||
        constr->num_check != rel->rd_rel->relchecks)
      continue;
    if (compiled.stale || compiled.relid != RelationGetRelid(rel) ||
        compiled.count != constr->num_check)
      compile(rel);
    result->ri_ConstraintExprs = compiled.states;
  }
}

void start_executor(QueryDesc *query, int eflags) {
  bool ours = lend_to_next_executor;
  lend_to_next_executor = false;
  if (previous_executor_start != nullptr)
    previous_executor_start(query, eflags);
  else
    standard_ExecutorStart(query, eflags);
  if (ours && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0) lend(query->estate);
}

}  // namespace
}  // namespace idem::compiled_checks

extern "C" {

static void idem_executor_start(QueryDesc *query, int eflags) {
  idem::run_guarded([query, eflags]() -> Datum {
    idem::compiled_checks::start_executor(query, eflags);
    return 0;
  });
}

// Any change to the table's definition (ALTER TABLE, DROP/CREATE EXTENSION,
// a relcache reset) invalidates its entry first.
static void idem_forget_compiled_checks(Datum, Oid relid) {
  if (relid == InvalidOid || relid == idem::compiled_checks::compiled.relid)
    idem::compiled_checks::compiled.stale = true;
}
}

namespace idem::compiled_checks {

void install() {
  previous_executor_start = ExecutorStart_hook;
  ExecutorStart_hook = idem_executor_start;
  CacheRegisterRelcacheCallback(idem_forget_compiled_checks, Datum(0));
}

int execute_plan(SPIPlanPtr plan, Datum *values, const char *nulls) {
  volatile int result = 0;
  lend_to_next_executor = true;
  PG_TRY();
  {
    result = SPI_execute_plan(plan, values, nulls, false, 0);
  }
  PG_FINALLY();
  {
    lend_to_next_executor = false;
  }
  PG_END_TRY();
  return result;
}

}  // namespace idem::compiled_checks
