// Key probes (key_probe.hpp).
#include "keys/key_probe.hpp"

#include "pg/citus.hpp"
#include "pg/spi_session.hpp"
#include "pure/errors.hpp"

namespace idem {

using catalog_cache::IdemRelation;

namespace {

constexpr int key_columns = 2;

// The detail and hint of an error about the extension's own tables, used
// inside ereport() as errdetail is.
int errdetail_not_ours() {
  errdetail("The extension's tables are not the ones this library reads.");
  return errhint(
      "Run ALTER EXTENSION idem UPDATE, or reinstall the library that matches the extension.");
}

// What a probe resolves by name, kept per backend: a probe is made for every
// claim and consume_once, and the names cost syscache lookups and a scan of
// the columns each time. An entry holds while the catalog cache counts no
// invalidation of its table (ALTER TABLE, DROP, a dropped or re-created
// index, DROP EXTENSION, a lost invalidation), and is resolved again at the
// next probe otherwise. A few entries suffice: one per probing call site.
constexpr int max_probed_columns = 16;
struct ResolvedProbe {
  IdemRelation table;
  const char *const *columns;  // the caller's constant, by address
  int column_count;
  uint64 table_changes;  // catalog_cache::relation_changes(table) when resolved
  Oid table_oid;
  Oid index_oid;
  AttrNumber attnums[max_probed_columns];
  AttrNumber last_attnum;  // the highest of attnums
};
constexpr int max_resolved = 4;
ResolvedProbe resolved[max_resolved];
int resolved_count = 0;

// The relation idem.`name`, or an internal error naming it: the extension's
// own objects are missing only when its scripts and this library disagree.
Oid idem_relation(IdemRelation relation) {
  Oid oid = catalog_cache::relation_oid(relation);
  if (OidIsValid(oid)) return oid;
  get_namespace_oid("idem", false);  // without the schema, its own error
  ereport(ERROR, (errcode_of(sqlstate::internal),
                  errmsg("idem.%s does not exist", catalog_cache::relation_name(relation)),
                  errdetail_not_ours()));
}

// The attribute number of column `name` of `relation`.
AttrNumber column_number(Relation relation, const char *name) {
  int index = attribute_index(RelationGetDescr(relation), name);
  if (index >= 0) return static_cast<AttrNumber>(index + 1);
  ereport(ERROR, (errcode_of(sqlstate::internal),
                  errmsg("idem.%s has no column %s", RelationGetRelationName(relation), name),
                  errdetail_not_ours()));
}

// Whether `entry` was resolved for this call site (its table and columns).
bool for_call_site(const ResolvedProbe &entry, IdemRelation table, const char *const columns[],
                   int column_count) {
  return entry.table == table && entry.columns == columns && entry.column_count == column_count;
}

// The call site's entry, unless an invalidation of its table came since.
const ResolvedProbe *find_resolved(IdemRelation table, const char *const columns[],
                                   int column_count) {
  for (int i = 0; i < resolved_count; ++i)
    if (for_call_site(resolved[i], table, columns, column_count))
      return resolved[i].table_changes == catalog_cache::relation_changes(table) ? &resolved[i]
                                                                                : nullptr;
  return nullptr;
}

// Resolves the names with the relations open (and locked), and keeps the
// answer unless the cache is full.
ResolvedProbe resolve(IdemRelation table, IdemRelation key_index, const char *const columns[],
                      int column_count, Relation heap, Relation index) {
  if (column_count > max_probed_columns)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("a key probe reads at most 16 columns"), errdetail_not_ours()));
  if (index->rd_index->indrelid != RelationGetRelid(heap) ||
      IndexRelationGetNumberOfKeyAttributes(index) != key_columns)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.%s is not a two-column key of idem.%s",
                           catalog_cache::relation_name(key_index),
                           catalog_cache::relation_name(table)),
                    errdetail_not_ours()));
  ResolvedProbe probe = {table,
                         columns,
                         column_count,
                         catalog_cache::relation_changes(table),
                         RelationGetRelid(heap),
                         RelationGetRelid(index),
                         {},
                         0};
  for (int i = 0; i < column_count; ++i) {
    probe.attnums[i] = column_number(heap, columns[i]);
    probe.last_attnum = Max(probe.last_attnum, probe.attnums[i]);
  }
  // Replaces a stale entry for the same call site, else takes a free one.
  int slot = 0;
  while (slot < resolved_count && !for_call_site(resolved[slot], table, columns, column_count))
    ++slot;
  if (slot < max_resolved) {
    resolved[slot] = probe;
    if (slot == resolved_count) ++resolved_count;
  }
  return probe;
}

// The probe where the table is Citus's: the kept SELECT through SPI, its
// copies made in `into`.
bool probe_through_spi(Statement statement, const text *first, const text *second,
                       int column_count, MemoryContext into, Datum values[], bool nulls[]) {
  MemoryContext previous = MemoryContextSwitchTo(into);
  SpiSession session;
  spi_connect(&session);
  Datum params[key_columns] = {PointerGetDatum(first), PointerGetDatum(second)};
  uint64 rows = spi_run(&session, statement, params, nullptr);
  if (rows > 1)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("a key probe found more than one row for a key"),
                    errdetail_not_ours()));
  for (uint64 i = 0; i < rows; ++i)
    for (int column = 0; column < column_count; ++column)
      values[column] = spi_copy_datum(&session, 0, column + 1, &nulls[column]);
  spi_finish(&session);
  MemoryContextSwitchTo(previous);
  return rows == 1;
}

}  // namespace

bool probe_by_key(IdemRelation table, IdemRelation key_index, const text *first,
                  const text *second, int column_count, const char *const columns[],
                  Statement on_citus, MemoryContext into, Datum values[], bool nulls[]) {
  if (citus::is_citus_table(table))
    return probe_through_spi(on_citus, first, second, column_count, into, values, nulls);
  // A cached resolution holds until an invalidation drops it; locking the
  // table processes those that arrived, so the entry is looked up again once
  // the table is open. A cached table dropped since is not an error here:
  // the names are resolved afresh.
  const ResolvedProbe *known = find_resolved(table, columns, column_count);
  // AccessShareLock until the transaction ends, as a statement's read holds it.
  Relation heap = known != nullptr ? try_table_open(known->table_oid, AccessShareLock) : nullptr;
  if (heap == nullptr) heap = table_open(idem_relation(table), AccessShareLock);
  known = find_resolved(table, columns, column_count);
  Relation index = index_open(known != nullptr && known->table_oid == RelationGetRelid(heap)
                                  ? known->index_oid
                                  : idem_relation(key_index),
                              AccessShareLock);
  // Opening the index may have processed invalidations too: the entry is
  // taken by value once both are open, and only if it names both.
  known = find_resolved(table, columns, column_count);
  ResolvedProbe probe;
  if (known != nullptr && known->table_oid == RelationGetRelid(heap) &&
      known->index_oid == RelationGetRelid(index))
    probe = *known;
  else
    probe = resolve(table, key_index, columns, column_count, heap, index);
  const AttrNumber *attnums = probe.attnums;

  // Equality on each key column, with the index's collation (texteq is the
  // equality of the default text operator class the key uses).
  ScanKeyData keys[key_columns];
  const text *key_values[key_columns] = {first, second};
  for (int i = 0; i < key_columns; ++i)
    ScanKeyEntryInitialize(&keys[i], 0, static_cast<AttrNumber>(i + 1), BTEqualStrategyNumber,
                           InvalidOid, index->rd_indcollation[i], F_TEXTEQ,
                           PointerGetDatum(key_values[i]));

  // What SPI does before a statement of a volatile function: make the
  // transaction's earlier commands visible, then take the snapshot.
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  IndexScanDesc scan = compat::begin_index_scan(heap, index, snapshot, key_columns);
  index_rescan(scan, keys, key_columns, nullptr, 0);
  TupleTableSlot *slot = table_slot_create(heap, nullptr);
  bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
  if (found) {
    // One deform up to the last column read (the columns are not in table
    // order, and each slot_getattr past the deformed ones would deform again).
    slot_getsomeattrs(slot, probe.last_attnum);
    MemoryContext previous = MemoryContextSwitchTo(into);
    TupleDesc descriptor = RelationGetDescr(heap);
    for (int i = 0; i < column_count; ++i) {
      int at = attnums[i] - 1;
      Form_pg_attribute attribute = TupleDescAttr(descriptor, at);
      nulls[i] = slot->tts_isnull[at];
      // The slot's values point into a pinned buffer; copy them out.
      values[i] = nulls[i] ? Datum(0)
                           : datumCopy(slot->tts_values[at], attribute->attbyval, attribute->attlen);
    }
    MemoryContextSwitchTo(previous);
  }
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  UnregisterSnapshot(snapshot);
  index_close(index, NoLock);
  table_close(heap, NoLock);
  return found;
}

bool same_text(const text *a, const text *b) {
  size_t bytes = VARSIZE_ANY_EXHDR(a);
  return bytes == VARSIZE_ANY_EXHDR(b) && memcmp(VARDATA_ANY(a), VARDATA_ANY(b), bytes) == 0;
}

}  // namespace idem
