// Whole-row CHECK functions (row_check.hpp).
#include "keys/row_check.hpp"

#include "pure/errors.hpp"

extern "C" {
#include "utils/typcache.h"
}

namespace idem {

namespace {

constexpr int max_row_columns = sizeof(RowColumns::indexes) / sizeof(int);

// Resolves the names in `desc` (attribute_index, pg.hpp).
void resolve(RowColumns *columns, TupleDesc desc) {
  if (columns->count > max_row_columns)
    ereport(ERROR,
            (errcode_of(sqlstate::internal), errmsg("a row rule reads at most 16 columns")));
  for (int i = 0; i < columns->count; ++i) {
    int found = attribute_index(desc, columns->names[i]);
    if (found < 0)
      ereport(ERROR, (errcode_of(sqlstate::internal),
                      errmsg("the row checked has no column %s", columns->names[i]),
                      errdetail("The extension's table and this library disagree."),
                      errhint("Run ALTER EXTENSION idem UPDATE, or reinstall the library that "
                              "matches it.")));
    columns->indexes[i] = found;
  }
}

}  // namespace

Datum call_with_row_columns(FunctionCallInfo fcinfo, RowColumns *columns,
                            Datum (*rules)(FunctionCallInfo)) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();  // as a CHECK of all-NULL columns: not refused
  HeapTupleHeader header = PG_GETARG_HEAPTUPLEHEADER(0);
  Oid type = HeapTupleHeaderGetTypeId(header);
  // The type cache's descriptor, without a reference count: nothing below
  // can process an invalidation before the last use of `desc`.
  TypeCacheEntry *entry = lookup_type_cache(type, TYPECACHE_TUPDESC);
  TupleDesc desc = entry->tupDesc;
  if (desc == nullptr)
    ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("a row rule takes a table's row")));
  if (columns->type != type || columns->identifier != entry->tupDesc_identifier) {
    resolve(columns, desc);
    columns->type = type;
    columns->identifier = entry->tupDesc_identifier;
  }
  HeapTupleData tuple = heap_tuple_of(header);
  Datum *values = static_cast<Datum *>(palloc(desc->natts * sizeof(Datum)));
  bool *nulls = static_cast<bool *>(palloc(desc->natts * sizeof(bool)));
  heap_deform_tuple(&tuple, desc, values, nulls);
  LOCAL_FCINFO(arguments, max_row_columns);
  InitFunctionCallInfoData(*arguments, nullptr, static_cast<short>(columns->count), InvalidOid,
                           nullptr, nullptr);
  for (int i = 0; i < columns->count; ++i) {
    arguments->args[i].value = values[columns->indexes[i]];
    arguments->args[i].isnull = nulls[columns->indexes[i]];
  }
  return rules(arguments);
}

}  // namespace idem
