// The per-backend cache of idem's catalog objects (catalog_cache.hpp).
//
// Every claim, replay and consume_once needs the key table's shape and the
// OIDs behind a key probe, and every policy lookup whether idem.scope_policy
// changed; resolving the names each time costs syscache lookups. The
// callbacks below only mark entries stale and count: they run while
// invalidations are processed, where no catalog may be read.
#include "pg/catalog_cache.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace idem::catalog_cache {

namespace {

struct Entry {
  const char *name;
  IdemRelation group;  // the table: a key index is invalidated with it
  bool looked_up;      // at least once in this backend
  Oid oid;             // the last answer; InvalidOid: not there
  bool current;        // oid is still what the name means
  uint64 changes;      // relation_changes
};

// In IdemRelation order.
Entry entries[] = {
    {"idempotency_request", IdemRelation::key_table, false, InvalidOid, false, 1},
    {"idempotency_request_pkey", IdemRelation::key_table, false, InvalidOid, false, 1},
    {"consumed_message", IdemRelation::consumed_message, false, InvalidOid, false, 1},
    {"consumed_message_pkey", IdemRelation::consumed_message, false, InvalidOid, false, 1},
    {"scope_policy", IdemRelation::scope_policy, false, InvalidOid, false, 1},
    {"scope_owner", IdemRelation::scope_owner, false, InvalidOid, false, 1},
    {"outbox_event", IdemRelation::outbox_event, false, InvalidOid, false, 1},
    {"fence_seq", IdemRelation::fence_seq, false, InvalidOid, false, 1},
    {"fence_jump_seq", IdemRelation::fence_jump_seq, false, InvalidOid, false, 1},
};
constexpr int entry_count = sizeof entries / sizeof entries[0];
static_assert(entry_count == static_cast<int>(IdemRelation::fence_jump_seq) + 1,
              "one entry per IdemRelation");

bool key_table_binding = false;  // valid while the key table's entry is current
uint64 namespace_change_count = 1;
uint64 enum_change_count = 1;
bool callbacks_registered = false;

Entry &entry_of(IdemRelation relation) { return entries[static_cast<int>(relation)]; }

// relid: the invalidated relation, or InvalidOid for every relation (a
// lost invalidation, a cache reset).
void relation_changed(Datum, Oid relid) {
  bool concerned[entry_count] = {};
  for (const Entry &entry : entries)
    if (!OidIsValid(relid) || (entry.looked_up && (entry.oid == relid || !OidIsValid(entry.oid))))
      concerned[static_cast<int>(entry.group)] = true;
  for (Entry &entry : entries) {
    if (!concerned[static_cast<int>(entry.group)]) continue;
    entry.current = false;
    entry.changes += 1;
  }
}

// A schema renamed, dropped or created: every name may mean another object.
void namespace_changed(Datum, int, uint32) {
  namespace_change_count += 1;
  for (Entry &entry : entries) entry.current = false;
}

void enum_changed(Datum, int, uint32) { enum_change_count += 1; }

void register_callbacks() {
  if (callbacks_registered) return;
  CacheRegisterRelcacheCallback(relation_changed, 0);
  CacheRegisterSyscacheCallback(NAMESPACEOID, namespace_changed, 0);
  CacheRegisterSyscacheCallback(ENUMOID, enum_changed, 0);
  callbacks_registered = true;
}

}  // namespace

const char *relation_name(IdemRelation relation) { return entry_of(relation).name; }

Oid relation_oid(IdemRelation relation) {
  register_callbacks();
  Entry &entry = entry_of(relation);
  if (entry.current) return entry.oid;
  // A catalog read below may take a lock and so process invalidations: the
  // answer is kept only if none concerned it meanwhile.
  uint64 changes_before = entry.changes;
  uint64 namespaces_before = namespace_change_count;
  Oid schema = get_namespace_oid("idem", true);
  Oid oid = OidIsValid(schema) ? get_relname_relid(entry.name, schema) : InvalidOid;
  bool binding = false;
  if (relation == IdemRelation::key_table && OidIsValid(oid))
    binding = get_attnum(oid, "bound_session") != InvalidAttrNumber;
  entry.looked_up = true;
  entry.oid = oid;
  if (relation == IdemRelation::key_table) key_table_binding = binding;
  entry.current = OidIsValid(oid) && entry.changes == changes_before &&
                  namespace_change_count == namespaces_before;
  return oid;
}

uint64 relation_changes(IdemRelation relation) {
  register_callbacks();
  return entry_of(relation).changes;
}

bool key_table_has_binding() {
  Oid table = relation_oid(IdemRelation::key_table);
  return OidIsValid(table) && key_table_binding;
}

uint64 enum_changes() {
  register_callbacks();
  return enum_change_count;
}

}  // namespace idem::catalog_cache
