// The per-backend cache of idem.scope_owner and the check of scope_owner.hpp.
// Loaded as scope_policy.cpp loads idem.scope_policy: the table's statement
// trigger sends a relcache invalidation of the table, the catalog cache
// counts it (catalog_cache::relation_changes), and the next check that sees
// a new count reloads, under a snapshot taken then. A change of the table's
// owner (ALTER TABLE ... OWNER TO) invalidates the table's relcache entry too.
// Otherwise a check is a hash probe per distinct prefix length
// (pure/scope_prefix.hpp) and is_member_of_role, whose answers Postgres
// caches per backend until pg_auth_members or pg_authid change.
#include "policy/scope_owner.hpp"

#include "pg/catalog_cache.hpp"
#include "pg/citus.hpp"
#include "pg/guard.hpp"
#include "pg/message_text.hpp"
#include "pg/settings.hpp"
#include "pg/spi_session.hpp"
#include "base/arguments.hpp"
#include "pure/scope_prefix.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "utils/acl.h"
#include "utils/inval.h"
}

namespace idem {

namespace {

constexpr int owner_columns = 3;

// As in scope_policy.cpp: the relation_changes count the cache reflects (0:
// never loaded); a load is kept only if no invalidation arrived while it ran.
uint64 loaded_at = 0;
bool table_present = false;
Oid extension_owner = InvalidOid;  // the owner of idem.scope_owner

uint64 owner_changes() {
  return catalog_cache::relation_changes(catalog_cache::IdemRelation::scope_owner);
}

// The owner of the relation, InvalidOid when it is gone.
Oid relation_owner(Oid relation) {
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relation));
  if (!HeapTupleIsValid(tuple)) return InvalidOid;
  Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  return owner;
}

void load_owners() {
  uint64 started_at = owner_changes();
  begin_scope_owners();
  Oid table = catalog_cache::relation_oid(catalog_cache::IdemRelation::scope_owner);
  Oid table_owner = InvalidOid;
  if (OidIsValid(table)) {
    MemoryContext load_context =
        AllocSetContextCreate(CurrentMemoryContext, "idem owner load", ALLOCSET_DEFAULT_SIZES);
    MemoryContext previous = MemoryContextSwitchTo(load_context);
    SpiSession session;
    spi_connect(&session);
    // A snapshot taken now, after started_at was read: the cache outlives
    // this transaction, so it must not hold what an older (REPEATABLE READ)
    // snapshot saw; a change committed after it sends its invalidation
    // after started_at, and the next check loads again.
    Datum params[1] = {ObjectIdGetDatum(table)};
    // On Citus the table is a reference table, and Citus refuses its join
    // with pg_class inside a delegated call (a distributed query nested in
    // one on a shard): its rows are read alone, the owner from the catalog.
    bool on_citus = citus::is_citus_table(catalog_cache::IdemRelation::scope_owner);
    if (on_citus) table_owner = relation_owner(table);
    uint64 rows = spi_run_latest(&session, on_citus ? Statement::owner_rows : Statement::owner_load,
                                 params, nullptr);
    for (uint64 row = 0; row < rows; ++row) {
      Datum values[owner_columns];
      bool nulls[owner_columns];
      spi_copy_row(&session, row, owner_columns, values, nulls);
      if (!on_citus) table_owner = DatumGetObjectId(values[0]);
      if (nulls[1]) continue;  // an empty table: the one row of the outer join
      const text *prefix = DatumGetTextPP(values[1]);
      add_scope_owner(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix),
                      DatumGetObjectId(values[2]));
    }
    spi_finish(&session);
    MemoryContextSwitchTo(previous);
    MemoryContextDelete(load_context);
  }
  publish_scope_owners();
  // No row: the table was dropped between the name's lookup and the query's
  // snapshot; it counts as missing.
  table_present = OidIsValid(table_owner);
  extension_owner = table_owner;
  if (owner_changes() == started_at) loaded_at = started_at;
}

// judge_as's roles, innermost last, each with the subtransaction that set
// it: an end goes back to the role judged before (not to the calling
// role), so a judgement nested in another restores the outer one. Two
// levels are all idem itself uses (the call's claim, a completer's run);
// the bound only stops a runaway.
struct Judgement {
  Oid role;
  SubTransactionId set_in;
};
constexpr int max_judgements = 8;
Judgement judgements[max_judgements];
int judgement_depth = 0;
bool callbacks_registered = false;

void end_of_transaction(XactEvent event, void *) {
  if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
      event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
      event == XACT_EVENT_PREPARE)
    judgement_depth = 0;
}

void end_of_subtransaction(SubXactEvent event, SubTransactionId ending, SubTransactionId,
                           void *) {
  // Set in the aborted subtransaction or in one of its children: back to
  // what was judged outside it.
  if (event != SUBXACT_EVENT_ABORT_SUB) return;
  while (judgement_depth > 0 && judgements[judgement_depth - 1].set_in >= ending)
    --judgement_depth;
}

Oid calling_role() {
  return judgement_depth > 0 ? judgements[judgement_depth - 1].role : GetOuterUserId();
}

enum class Verdict { allowed, not_a_member, uncovered };

Verdict judge(const text *scope) {
  if (!scope_owners_loaded()) return Verdict::allowed;
  Oid role = calling_role();
  uint32 owner;
  if (find_scope_owner(VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope), &owner))
    return is_member_of_role(role, owner) ? Verdict::allowed : Verdict::not_a_member;
  if (!settings.require_scope_owner) return Verdict::allowed;
  return is_member_of_role(role, extension_owner) ? Verdict::allowed : Verdict::uncovered;
}

Datum check_scope_owner(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0)) {
    KeyName none = {nullptr, nullptr};
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("idempotency scope must not be NULL"),
                    errdetail_key(none, "scope is NULL"),
                    errhint("Pass the command domain the key belongs to, such as "
                            "'create_order'.")));
  }
  require_scope_owner(PG_GETARG_TEXT_PP(0));
  PG_RETURN_VOID();
}

Datum may_use_scope_sql(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0)) PG_RETURN_BOOL(false);
  PG_RETURN_BOOL(may_use_scope(PG_GETARG_TEXT_PP(0)));
}

}  // namespace

bool scope_owners_loaded() {
  // A change committed since this transaction's last lock acquisition (an
  // owner row, a membership granted or revoked) is in force at the next
  // call, not at the transaction's next new lock: inside one transaction
  // the key table's lock is already held and reads no invalidation. Cheap
  // when nothing is queued (one unlocked flag read).
  AcceptInvalidationMessages();
  if (loaded_at != owner_changes()) load_owners();
  return table_present;
}

void require_scope_owner(const text *scope, SourceLocation where) {
  Verdict verdict = judge(scope);
  if (verdict == Verdict::allowed) return;
  // A session may outlive the DROP ROLE of the role it runs as.
  const char *role = GetUserNameFromId(calling_role(), true);
  if (role == nullptr) role = "(dropped role)";
  IDEM_EREPORT_AT(
      where,
      (errcode_of(sqlstate::scope_not_owned),
       errmsg("permission denied for idempotency scope \"%s\"", message_text::excerpt(scope)),
       verdict == Verdict::not_a_member
           ? errdetail("The scope is owned by a role that role \"%s\" is not a member of "
                       "(idem.scope_owner).",
                       role)
           : errdetail("No row of idem.scope_owner covers the scope, and "
                       "idem.require_scope_owner is on."),
       errhint("Grant the owning role to the calling role, or use a scope the calling role "
               "owns.")));
}

bool may_use_scope(const text *scope) { return judge(scope) == Verdict::allowed; }

void judge_as(Oid role) {
  if (!callbacks_registered) {
    RegisterXactCallback(end_of_transaction, nullptr);
    RegisterSubXactCallback(end_of_subtransaction, nullptr);
    callbacks_registered = true;
  }
  if (judgement_depth == max_judgements)
    elog(ERROR, "idem: judgements nested more than %d deep", max_judgements);
  judgements[judgement_depth++] = Judgement{role, GetCurrentSubTransactionId()};
}

void judge_end() {
  Assert(judgement_depth > 0);
  if (judgement_depth > 0) --judgement_depth;
}

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(check_scope_owner, idem::check_scope_owner)
IDEM_SQL_FUNCTION(may_use_scope, idem::may_use_scope_sql)

}  // extern "C"
