// The search_path proof over kept statement texts (statement_proof.hpp).
//
// The walk refuses, it never repairs: a refused text names the node that
// failed, and the fix is in src/pure/*.def. Names the parser's own grammar
// spells (SystemTypeName, SystemFuncName: INTEGER, EXTRACT, AT TIME ZONE)
// come out qualified with pg_catalog, so they pass as written ones do.
//
// Why each accepted name resolves the same under every search_path:
//   - schema pg_catalog and idem only: a caller can create nothing in either
//     (test/sql/61_hostile_role.sql), while pg_temp, which a caller owns, is
//     refused even when written out;
//   - an unqualified relation is accepted only where a WITH of the same
//     statement defines that name and is in scope (parse analysis looks up
//     CTEs before the catalog);
//   - functions: pg_catalog's are accepted from a list reviewed for this
//     proof (none reads a name from its argument at run time, as
//     to_regprocedure does); idem's when every function of the name is
//     LANGUAGE C or internal, or pinned: the planner inlines an unpinned
//     LANGUAGE sql function, analysing its body under the caller's path;
//   - a cast to a reg* type looks the name up at run time (regclassin): only
//     a literal `schema.name` or a parameter declared oid, int4 or int8 is
//     accepted under one;
//   - what is stored rather than written (column defaults, CHECKs, views,
//     triggers' functions, which carry their own pin) was resolved when it
//     was created and is not part of the text.
#include "pg/statement_proof.hpp"

#include "pg/guard.hpp"
#include "pure/errors.hpp"

extern "C" {
#include "catalog/pg_language.h"
#include "parser/parser.h"
#include "utils/catcache.h"
}

namespace idem::statement_proof {

namespace {

// The statements that fail the proof by design and run only in the
// background worker, under its pinned path.
//   completer_candidates: to_regprocedure(p.completer) reads the completer
//   named in idem.scope_policy, which the policy's writer spelled, on the
//   search_path the worker pins.
constexpr Statement pinned_only_statements[] = {Statement::completer_candidates};

constexpr char pinned_path[] = "pg_catalog, pg_temp";

// pg_catalog functions reviewed for the proof: each takes its arguments as
// values and resolves no name from them. nextval takes a regclass, so its
// argument must be a cast the proof accepts (a reg* cast's rule).
constexpr const char *reviewed_catalog_functions[] = {
    "concat",          "jsonb_build_array", "nextval", "pg_my_temp_schema",
    "statement_timestamp", "string_agg",
};
constexpr const char *functions_taking_regclass[] = {"nextval"};

constexpr const char *reg_types[] = {"regclass",   "regproc",      "regprocedure", "regoper",
                                     "regoperator", "regtype",     "regconfig",    "regdictionary",
                                     "regcollation", "regnamespace", "regrole"};

enum class Verdict : unsigned char { unproven, proven, pinned_only };
Verdict verdicts[statement_count];

struct Proof {
  const ArgTypes *args;
  List *ctes;            // names of the WITH queries in scope (char *)
  const char *refusal;   // the first node that failed, or nullptr
};
IDEM_LONGJMP_SAFE(Proof);

bool listed_statement(Statement statement) {
  for (Statement pinned : pinned_only_statements)
    if (pinned == statement) return true;
  return false;
}

template <class Names>
bool listed(const Names &names, const char *name) {
  for (const char *listed_name : names)
    if (strcmp(listed_name, name) == 0) return true;
  return false;
}

bool refuse(Proof *proof, const char *format, const char *name) {
  proof->refusal = psprintf(format, name);
  return true;  // stops the walk
}

bool safe_schema(const char *schema) {
  return strcmp(schema, "pg_catalog") == 0 || strcmp(schema, "idem") == 0;
}

// A qualified name list (schema.name or catalog.schema.name): its schema,
// or nullptr when it is not qualified.
const char *schema_of(List *names) {
  int length = list_length(names);
  if (length < 2) return nullptr;
  return strVal(list_nth(names, length - 2));
}

const char *last_name(List *names) { return strVal(llast(names)); }

bool pg_catalog_named(List *names) {
  const char *schema = schema_of(names);
  return schema != nullptr && strcmp(schema, "pg_catalog") == 0;
}

// Whether calling the function runs nothing analysed under the caller's
// search_path: code (C, internal), a body parsed once (BEGIN ATOMIC), or a
// body run under a pinned path.
bool body_is_path_free(HeapTuple tuple) {
  auto *proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  if (proc->prolang == ClanguageId || proc->prolang == INTERNALlanguageId) return true;
  bool isnull;
  if (proc->prolang == SQLlanguageId) {
    SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosqlbody, &isnull);
    if (!isnull) return true;
  }
  Datum config = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_proconfig, &isnull);
  if (isnull) return false;
  ArrayType *settings = DatumGetArrayTypeP(config);
  Datum *items;
  int count;
  deconstruct_array(settings, TEXTOID, -1, false, TYPALIGN_INT, &items, nullptr, &count);
  for (int i = 0; i < count; ++i)
    if (strcmp(TextDatumGetCString(items[i]), "search_path=pg_catalog, pg_temp") == 0) return true;
  return false;
}

// Every function of idem named `name` (any arguments) is path-free; false
// also when there is none.
bool idem_functions_path_free(const char *name) {
  Oid idem_schema = get_namespace_oid("idem", true);
  CatCList *candidates = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(name));
  int found = 0;
  bool all_free = true;
  for (int i = 0; i < candidates->n_members; ++i) {
    HeapTuple tuple = &candidates->members[i]->tuple;
    if (reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple))->pronamespace != idem_schema) continue;
    ++found;
    all_free = all_free && body_is_path_free(tuple);
  }
  ReleaseSysCacheList(candidates);
  return found > 0 && all_free;
}

bool is_reg_type(TypeName *type) {
  return type->names != NIL && pg_catalog_named(type->names) &&
         listed(reg_types, last_name(type->names));
}

// `schema.name` in lower case, schema pg_catalog or idem.
bool qualified_literal(const char *text) {
  const char *dot = strchr(text, '.');
  if (dot == nullptr || dot == text || dot[1] == '\0' || strchr(dot + 1, '.') != nullptr)
    return false;
  for (const char *at = text; *at != '\0'; ++at)
    if (!(*at == '.' || *at == '_' || (*at >= 'a' && *at <= 'z') || (*at >= '0' && *at <= '9')))
      return false;
  char *schema = pnstrdup(text, dot - text);
  return safe_schema(schema);
}

// What a reg* cast may convert: a qualified literal or a parameter declared
// as a number (an OID's value, nothing to look up).
bool reg_cast_argument_ok(Proof *proof, Node *argument) {
  if (IsA(argument, A_Const)) {
    auto *constant = reinterpret_cast<A_Const *>(argument);
    return !constant->isnull && nodeTag(&constant->val) == T_String &&
           qualified_literal(strVal(&constant->val));
  }
  if (IsA(argument, ParamRef)) {
    int number = reinterpret_cast<ParamRef *>(argument)->number;
    if (number < 1 || number > proof->args->count) return false;
    sql_type::SqlType type = proof->args->types[number - 1];
    return type == sql_type::oid || type == sql_type::int4 || type == sql_type::int8;
  }
  return false;
}

bool walk(Node *node, void *context);

bool check_type(Proof *proof, TypeName *type) {
  if (type->pct_type) return refuse(proof, "type %s%%TYPE", NameListToString(type->names));
  if (type->names == NIL) return false;  // given by OID, no name
  const char *schema = schema_of(type->names);
  if (schema == nullptr || !safe_schema(schema))
    return refuse(proof, "type %s is not qualified with pg_catalog or idem",
                  NameListToString(type->names));
  return false;
}

bool check_function(Proof *proof, FuncCall *call) {
  const char *schema = schema_of(call->funcname);
  const char *name = last_name(call->funcname);
  if (schema == nullptr || !safe_schema(schema))
    return refuse(proof, "function %s is not qualified with pg_catalog or idem",
                  NameListToString(call->funcname));
  if (strcmp(schema, "pg_catalog") == 0) {
    if (!listed(reviewed_catalog_functions, name))
      return refuse(proof,
                    "function pg_catalog.%s is not among those reviewed as resolving no name "
                    "from its arguments (statement_proof.cpp)",
                    name);
    if (listed(functions_taking_regclass, name)) {
      ListCell *cell;
      foreach (cell, call->args) {
        Node *argument = static_cast<Node *>(lfirst(cell));
        auto *cast = IsA(argument, TypeCast) ? reinterpret_cast<TypeCast *>(argument) : nullptr;
        if (cast == nullptr || !is_reg_type(cast->typeName))
          return refuse(proof, "pg_catalog.%s takes a regclass: cast its argument explicitly",
                        name);
      }
    }
    return false;
  }
  if (!idem_functions_path_free(name))
    return refuse(proof,
                  "idem.%s is missing, or a function of that name has a body analysed under "
                  "the caller's search_path (neither C nor pinned)",
                  name);
  return false;
}

const char *expression_kind(A_Expr_Kind kind) {
  switch (kind) {
    case AEXPR_DISTINCT: return "IS DISTINCT FROM";
    case AEXPR_NOT_DISTINCT: return "IS NOT DISTINCT FROM";
    case AEXPR_NULLIF: return "NULLIF";
    case AEXPR_IN: return "IN (...)";
    case AEXPR_LIKE: return "LIKE";
    case AEXPR_ILIKE: return "ILIKE";
    case AEXPR_SIMILAR: return "SIMILAR TO";
    default: return "BETWEEN";
  }
}

bool check_expression(Proof *proof, A_Expr *expression) {
  if (expression->kind != AEXPR_OP && expression->kind != AEXPR_OP_ANY &&
      expression->kind != AEXPR_OP_ALL)
    return refuse(proof, "%s looks its operator up on the search_path",
                  expression_kind(expression->kind));
  if (!pg_catalog_named(expression->name))
    return refuse(proof, "operator %s is not written OPERATOR(pg_catalog.op)",
                  NameListToString(expression->name));
  return false;
}

bool check_relation(Proof *proof, RangeVar *relation) {
  if (relation->schemaname != nullptr) {
    if (!safe_schema(relation->schemaname))
      return refuse(proof, "relation %s is not in pg_catalog or idem",
                    quote_qualified_identifier(relation->schemaname, relation->relname));
    return false;
  }
  ListCell *cell;
  foreach (cell, proof->ctes)
    if (strcmp(static_cast<char *>(lfirst(cell)), relation->relname) == 0) return false;
  return refuse(proof, "relation %s is not schema-qualified", relation->relname);
}

WithClause **with_clause_of(Node *node) {
  switch (nodeTag(node)) {
    case T_SelectStmt: return &reinterpret_cast<SelectStmt *>(node)->withClause;
    case T_InsertStmt: return &reinterpret_cast<InsertStmt *>(node)->withClause;
    case T_UpdateStmt: return &reinterpret_cast<UpdateStmt *>(node)->withClause;
    case T_DeleteStmt: return &reinterpret_cast<DeleteStmt *>(node)->withClause;
    default: return nullptr;
  }
}

// A statement with a WITH: each query of the WITH sees the names before it
// (all of them when RECURSIVE), the statement itself sees all.
bool walk_with(Proof *proof, Node *statement, WithClause **with) {
  WithClause *clause = *with;
  List *outer = proof->ctes;
  List *scope = list_copy(outer);
  ListCell *cell;
  if (clause->recursive)
    foreach (cell, clause->ctes)
      scope = lappend(scope, reinterpret_cast<CommonTableExpr *>(lfirst(cell))->ctename);
  foreach (cell, clause->ctes) {
    auto *query = reinterpret_cast<CommonTableExpr *>(lfirst(cell));
    if (query->cycle_clause != nullptr)
      return refuse(proof, "WITH %s ... CYCLE looks its operators up on the search_path",
                    query->ctename);
    proof->ctes = scope;
    if (walk(query->ctequery, proof)) return true;
    if (!clause->recursive) scope = lappend(scope, query->ctename);
  }
  proof->ctes = scope;
  *with = nullptr;
  bool stopped = compat::walk_raw_tree(statement, walk, proof);
  *with = clause;
  proof->ctes = outer;
  return stopped;
}

bool check_index_element(Proof *proof, IndexElem *element) {
  if (element->collation != NIL && !pg_catalog_named(element->collation))
    return refuse(proof, "collation %s is not qualified with pg_catalog",
                  NameListToString(element->collation));
  if (element->opclass != NIL)
    return refuse(proof, "operator class %s named in ON CONFLICT",
                  NameListToString(element->opclass));
  return false;
}

bool walk(Node *node, void *context) {
  auto *proof = static_cast<Proof *>(context);
  if (node == nullptr) return false;
  check_stack_depth();
  if (WithClause **with = with_clause_of(node); with != nullptr && *with != nullptr)
    return walk_with(proof, node, with);
  switch (nodeTag(node)) {
    case T_RangeVar:
      if (check_relation(proof, reinterpret_cast<RangeVar *>(node))) return true;
      break;
    case T_TypeName:
      if (check_type(proof, reinterpret_cast<TypeName *>(node))) return true;
      break;
    case T_TypeCast: {
      auto *cast = reinterpret_cast<TypeCast *>(node);
      if (check_type(proof, cast->typeName)) return true;
      if (is_reg_type(cast->typeName) && !reg_cast_argument_ok(proof, cast->arg))
        return refuse(proof,
                      "a cast to %s looks its argument up on the search_path: cast a literal "
                      "schema.name or an oid parameter",
                      NameListToString(cast->typeName->names));
      break;
    }
    case T_FuncCall:
      if (check_function(proof, reinterpret_cast<FuncCall *>(node))) return true;
      break;
    case T_A_Expr:
      if (check_expression(proof, reinterpret_cast<A_Expr *>(node))) return true;
      break;
    case T_SubLink: {
      List *operator_name = reinterpret_cast<SubLink *>(node)->operName;
      if (operator_name != NIL && !pg_catalog_named(operator_name))
        return refuse(proof, "subquery comparison %s is not written OPERATOR(pg_catalog.op)",
                      NameListToString(operator_name));
      break;
    }
    case T_SortBy: {
      List *operator_name = reinterpret_cast<SortBy *>(node)->useOp;
      if (operator_name != NIL && !pg_catalog_named(operator_name))
        return refuse(proof, "ORDER BY ... USING %s is not qualified with pg_catalog",
                      NameListToString(operator_name));
      break;
    }
    case T_CollateClause: {
      List *name = reinterpret_cast<CollateClause *>(node)->collname;
      if (!pg_catalog_named(name))
        return refuse(proof, "collation %s is not qualified with pg_catalog",
                      NameListToString(name));
      break;
    }
    case T_CaseExpr:
      if (reinterpret_cast<CaseExpr *>(node)->arg != nullptr)
        return refuse(proof, "%s looks its = up on the search_path: write CASE WHEN",
                      "CASE x WHEN");
      break;
    case T_JoinExpr: {
      auto *join = reinterpret_cast<JoinExpr *>(node);
      if (join->usingClause != NIL || join->isNatural)
        return refuse(proof, "%s looks its = up on the search_path: write ON",
                      join->isNatural ? "NATURAL JOIN" : "JOIN USING");
      break;
    }
    case T_IndexElem:
      if (check_index_element(proof, reinterpret_cast<IndexElem *>(node))) return true;
      break;
    case T_RangeTableSample:
      return refuse(proof, "%s names its sampling method unqualified", "TABLESAMPLE");
    case T_LockingClause:
      // FOR UPDATE OF names range-table entries of the statement, never a
      // relation of the catalog (qualified names are an error there).
      return false;
    default: break;
  }
  return compat::walk_raw_tree(node, walk, proof);
}

// The first refusal over the whole text, or nullptr when it is proven.
const char *refusal_of(const char *sql, const ArgTypes &args) {
  List *statements = raw_parser(sql, RAW_PARSE_DEFAULT);
  Proof proof{&args, NIL, nullptr};
  ListCell *cell;
  foreach (cell, statements) {
    if (walk(reinterpret_cast<RawStmt *>(lfirst(cell))->stmt, &proof)) break;
  }
  return proof.refusal;
}

[[noreturn]] void raise_refused(const StatementText &declared, const char *refusal) {
  ereport(ERROR,
          (errcode_of(sqlstate::internal),
           errmsg("idem: statement %s is not proven to resolve nothing through search_path",
                  declared.name),
           errdetail("%s.", refusal),
           errhint("This is a bug in idem; please report it.")));
  pg_unreachable();
}

// The refusal for a text, in the caller's memory context, or nullptr.
const char *refusal_for(const char *sql, const ArgTypes &args) {
  MemoryContext proof_context =
      AllocSetContextCreate(CurrentMemoryContext, "idem statement proof", ALLOCSET_SMALL_SIZES);
  MemoryContext caller = MemoryContextSwitchTo(proof_context);
  const char *refusal = refusal_of(sql, args);
  MemoryContextSwitchTo(caller);
  if (refusal != nullptr) refusal = pstrdup(refusal);
  MemoryContextDelete(proof_context);
  return refusal;
}

bool path_is_pinned() { return strcmp(namespace_search_path, pinned_path) == 0; }

void require_pinned_path(const StatementText &declared) {
  if (path_is_pinned()) return;
  ereport(ERROR, (errcode_of(sqlstate::internal),
                  errmsg("idem: statement %s runs only under search_path = %s", declared.name,
                         pinned_path),
                  errdetail("It is not proven to resolve nothing through search_path, and "
                            "search_path is \"%s\".",
                            namespace_search_path),
                  errhint("This is a bug in idem; please report it.")));
}

}  // namespace

void prove_kept(const StatementText &declared) {
  const char *refusal = refusal_for(declared.sql, declared.args);
  bool declared_pinned = listed_statement(declared.statement);
  if (refusal != nullptr && !declared_pinned) raise_refused(declared, refusal);
  if (refusal == nullptr && declared_pinned)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem: statement %s is declared pinned-only but is proven",
                           declared.name),
                    errhint("Drop it from pinned_only_statements (statement_proof.cpp).")));
  // A pinned-only statement is analysed under the pinned path, too.
  if (declared_pinned) require_pinned_path(declared);
  verdicts[static_cast<int>(declared.statement)] =
      declared_pinned ? Verdict::pinned_only : Verdict::proven;
}

void check_run(Statement statement) {
  if (verdicts[static_cast<int>(statement)] == Verdict::pinned_only)
    require_pinned_path(statement_text(statement));
}

void prove_text(const StatementText &declared, const char *sql) {
  const char *refusal = refusal_for(sql, declared.args);
  if (refusal == nullptr) return;
  // A pinned-only statement on a shard (the completers' candidates on
  // Citus) is prepared and run at once, here: under the pinned path only.
  if (!listed_statement(declared.statement)) raise_refused(declared, refusal);
  require_pinned_path(declared);
}

// idem.search_path_proof(): each kept statement, its verdict, and why it
// is refused ('proven', 'pinned-only' or 'refused'); raises nothing, so a
// test sees every statement at once.
Datum search_path_proof(FunctionCallInfo fcinfo) {
  InitMaterializedSRF(fcinfo, 0);
  auto *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  for (const StatementText &declared : statement_texts) {
    const char *refusal = refusal_for(declared.sql, declared.args);
    bool declared_pinned = listed_statement(declared.statement);
    const char *verdict = refusal == nullptr   ? (declared_pinned ? "refused" : "proven")
                          : declared_pinned    ? "pinned-only"
                                               : "refused";
    Datum values[3] = {CStringGetTextDatum(declared.name), CStringGetTextDatum(verdict),
                       refusal == nullptr ? (Datum)0 : CStringGetTextDatum(refusal)};
    bool nulls[3] = {false, false, refusal == nullptr};
    tuplestore_putvalues(result->setResult, result->setDesc, values, nulls);
  }
  return (Datum)0;
}

// idem.search_path_proof(statement text): the same proof over any text, so
// a test can show each refusal; its first refusal, or NULL when proven. The
// text declares no parameters: a reg* cast of a parameter is refused.
Datum search_path_proof_of_text(FunctionCallInfo fcinfo) {
  static constexpr ArgTypes no_args{};
  const char *refusal = refusal_for(text_to_cstring(PG_GETARG_TEXT_PP(0)), no_args);
  if (refusal == nullptr) PG_RETURN_NULL();
  PG_RETURN_TEXT_P(cstring_to_text(refusal));
}

}  // namespace idem::statement_proof

extern "C" {
IDEM_SQL_FUNCTION(search_path_proof, idem::statement_proof::search_path_proof)
IDEM_SQL_FUNCTION(search_path_proof_of_text, idem::statement_proof::search_path_proof_of_text)
}
