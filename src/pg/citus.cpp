// Citus tables (citus.hpp).
#include "pg/citus.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "catalog/pg_namespace.h"
#include "utils/fmgroids.h"
}

namespace idem::citus {

namespace {

using catalog_cache::IdemRelation;

struct Known {
  bool valid;
  uint64 changes;  // catalog_cache::relation_changes when read
  bool citus_table;
};
constexpr int relation_count = static_cast<int>(IdemRelation::fence_jump_seq) + 1;
Known known[relation_count];

// Whether pg_dist_partition lists the relation. Its first column,
// logicalrelid, is the table's OID (as regclass).
bool listed_by_citus(Oid relid) {
  Oid catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
  if (!OidIsValid(catalog)) return false;
  Relation partitions = table_open(catalog, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
  SysScanDesc scan = systable_beginscan(partitions, InvalidOid, false, nullptr, 1, &key);
  bool listed = HeapTupleIsValid(systable_getnext(scan));
  systable_endscan(scan);
  table_close(partitions, AccessShareLock);
  return listed;
}

}  // namespace

bool is_citus_table(IdemRelation relation) {
  Known &entry = known[static_cast<int>(relation)];
  if (entry.valid && entry.changes == catalog_cache::relation_changes(relation))
    return entry.citus_table;
  // The OID first: it marks the relation looked up, so its invalidations count.
  Oid relid = catalog_cache::relation_oid(relation);
  uint64 changes = catalog_cache::relation_changes(relation);
  bool listed = OidIsValid(relid) && listed_by_citus(relid);
  entry = Known{true, changes, listed};
  return listed;
}

}  // namespace idem::citus
