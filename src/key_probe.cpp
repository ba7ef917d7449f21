// Key probes (key_probe.hpp).
#include "key_probe.hpp"

#include "errors.hpp"
#include "message_arguments.hpp"

namespace idem {

namespace {

constexpr int key_columns = 2;

// The relation idem.`name`, or an internal error naming it: the extension's
// own objects are missing only when its scripts and this library disagree.
Oid idem_relation(const char *name) {
  Oid relation = get_relname_relid(name, get_namespace_oid("idem", false));
  if (!OidIsValid(relation))
    message_arguments::throw_error(
        sqlstate::internal, psprintf("idem.%s does not exist", name),
        "The extension's tables are not the ones this library reads.",
        "Run ALTER EXTENSION idem UPDATE, or reinstall the library that matches the extension.");
  return relation;
}

// The attribute number of column `name` of `relation` (by name, so a column
// added or dropped by a later upgrade script cannot shift what is read).
AttrNumber column_number(Relation relation, const char *name) {
  TupleDesc descriptor = RelationGetDescr(relation);
  for (int i = 0; i < descriptor->natts; ++i) {
    Form_pg_attribute attribute = TupleDescAttr(descriptor, i);
    if (!attribute->attisdropped && strcmp(NameStr(attribute->attname), name) == 0)
      return attribute->attnum;
  }
  message_arguments::throw_error(
      sqlstate::internal, psprintf("idem.%s has no column %s", RelationGetRelationName(relation), name),
      "The extension's tables are not the ones this library reads.",
      "Run ALTER EXTENSION idem UPDATE, or reinstall the library that matches the extension.");
}

}  // namespace

bool probe_by_key(const char *table, const char *key_index, const text *first,
                  const text *second, int column_count, const char *const columns[],
                  Datum values[], bool nulls[]) {
  Oid table_oid = idem_relation(table);
  Oid index_oid = idem_relation(key_index);
  // AccessShareLock until the transaction ends, as a statement's read holds it.
  Relation heap = table_open(table_oid, AccessShareLock);
  Relation index = index_open(index_oid, AccessShareLock);
  if (index->rd_index->indrelid != table_oid ||
      IndexRelationGetNumberOfKeyAttributes(index) != key_columns)
    message_arguments::throw_error(
        sqlstate::internal, psprintf("idem.%s is not a two-column key of idem.%s", key_index, table),
        "The extension's tables are not the ones this library reads.",
        "Run ALTER EXTENSION idem UPDATE, or reinstall the library that matches the extension.");

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
    TupleDesc descriptor = RelationGetDescr(heap);
    for (int i = 0; i < column_count; ++i) {
      AttrNumber column = column_number(heap, columns[i]);
      Form_pg_attribute attribute = TupleDescAttr(descriptor, column - 1);
      Datum value = slot_getattr(slot, column, &nulls[i]);
      // The slot's values point into a pinned buffer; copy them out.
      values[i] = nulls[i] ? Datum(0) : datumCopy(value, attribute->attbyval, attribute->attlen);
    }
  }
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  UnregisterSnapshot(snapshot);
  index_close(index, NoLock);
  table_close(heap, NoLock);
  return found;
}

}  // namespace idem
