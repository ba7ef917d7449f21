// Every difference between the PostgreSQL majors idem supports (15, 17 and
// 18) in one place: each is a function or constant named for what it does,
// and the code calls that, so no PG_VERSION_NUM test stands anywhere else in
// src/ (scripts/check-includes.pl refuses one). Included by pg.hpp after
// the Postgres headers.
#pragma once

#if PG_VERSION_NUM < 150000
#error "idem needs PostgreSQL 15 or later (shmem_request_hook, MarkGUCPrefixReserved)"
#endif

namespace idem::compat {

// 17 added infinite intervals ('infinity'::interval, '-infinity'); before,
// every interval is finite.
inline bool interval_is_finite(const Interval *interval) {
#if PG_VERSION_NUM >= 170000
  return !INTERVAL_NOT_FINITE(interval);
#else
  (void)interval;
  return true;
#endif
}

// 17 lets an extension name its wait events (pg_stat_activity.wait_event);
// before, every extension wait shows as "Extension".
inline uint32 extension_wait_event(const char *name) {
#if PG_VERSION_NUM >= 170000
  return WaitEventExtensionNew(name);
#else
  (void)name;
  return PG_WAIT_EXTENSION;
#endif
}

// 16 replaced the per-catalog pg_*_aclcheck calls by object_aclcheck
// (utils/acl.h, included by pg.hpp); idem asks two catalogs.
inline bool role_may(Oid catalog, Oid object, Oid role, AclMode mode) {
#if PG_VERSION_NUM >= 160000
  return object_aclcheck(catalog, object, role, mode) == ACLCHECK_OK;
#else
  Assert(catalog == DatabaseRelationId || catalog == ProcedureRelationId);
  AclResult result = catalog == DatabaseRelationId
                         ? pg_database_aclcheck(object, role, mode)
                         : pg_proc_aclcheck(object, role, mode);
  return result == ACLCHECK_OK;
#endif
}

inline bool may_execute(Oid function, Oid role) {
  return role_may(ProcedureRelationId, function, role, ACL_EXECUTE);
}

// A completer's process connects as the function's owner
// (completer_worker.cpp). 17 lets a background worker connect as a role
// that may not log in (BGWORKER_BYPASS_ROLELOGINCHECK), as a completer owned
// by a group role needs; before, the owner must have LOGIN, as for pg_cron's
// background-worker jobs.
constexpr bool owner_needs_login = PG_VERSION_NUM < 170000;

inline uint32 completer_connection_flags() {
#if PG_VERSION_NUM >= 170000
  return BGWORKER_BYPASS_ROLELOGINCHECK;
#else
  return 0;
#endif
}

// A background worker is refused a database its role may not CONNECT to.
inline bool may_connect(Oid database, Oid role) {
  return role_may(DatabaseRelationId, database, role, ACL_CONNECT);
}

// 18 gave index_beginscan an instrumentation argument (EXPLAIN's index
// search counts); a scan outside the executor passes none.
inline IndexScanDesc begin_index_scan(Relation heap, Relation index, Snapshot snapshot,
                                      int nkeys) {
#if PG_VERSION_NUM >= 180000
  return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
  return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

// 16 gave raw_expression_tree_walker a typed callback (a macro over
// raw_expression_tree_walker_impl); 15 takes bool (*)() and calls it with
// (node, context).
using RawTreeWalker = bool (*)(Node *node, void *context);
inline bool walk_raw_tree(Node *node, RawTreeWalker walker, void *context) {
#if PG_VERSION_NUM >= 160000
  return raw_expression_tree_walker(node, walker, context);
#else
  // Through void (*)(void), the type GCC lets any function pointer pass.
  auto untyped = reinterpret_cast<void (*)(void)>(walker);
  return raw_expression_tree_walker(node, reinterpret_cast<bool (*)()>(untyped), context);
#endif
}

}  // namespace idem::compat

// The magic block. From 18 it also names the module and its version, which
// pg_get_loaded_modules() shows.
#if PG_VERSION_NUM >= 180000
#define IDEM_MODULE_MAGIC(library_version) \
  PG_MODULE_MAGIC_EXT(.name = "idem", .version = library_version)
#else
#define IDEM_MODULE_MAGIC(library_version) PG_MODULE_MAGIC
#endif
