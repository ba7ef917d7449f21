// Fences for existing rows (fence.hpp).
#include "keys/fence.hpp"

#include "pure/errors.hpp"

extern "C" {
#include "catalog/pg_sequence.h"
}

namespace idem {

namespace {

Oid fence_sequence() {
  Oid oid = get_relname_relid("fence_seq", get_namespace_oid("idem", false));
  if (!OidIsValid(oid))
    ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("idem.fence_seq does not exist"),
                    errhint("Run ALTER EXTENSION idem UPDATE, or reinstall the library that "
                            "matches the extension.")));
  return oid;
}

int64 increment_of(Oid sequence) {
  HeapTuple tuple = SearchSysCache1(SEQRELID, ObjectIdGetDatum(sequence));
  if (!HeapTupleIsValid(tuple))
    ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("idem.fence_seq is not a sequence")));
  int64 increment = reinterpret_cast<Form_pg_sequence>(GETSTRUCT(tuple))->seqincrement;
  ReleaseSysCache(tuple);
  return increment;
}

}  // namespace

int64 fence_above(int64 old_fence) {
  Oid sequence = fence_sequence();
  int64 fence = DatumGetInt64(DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(sequence)));
  if (fence > old_fence) return fence;
  int64 increment = increment_of(sequence);
  // A sequence that counts down, or one step, leaves nothing to keep
  // congruent: the next value above the row's is the fence.
  if (increment <= 1) increment = 1;
  int64 steps = (old_fence - fence) / increment + 1;
  if (steps > (PG_INT64_MAX - fence) / increment)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.fence_seq cannot rise above fence %lld",
                           static_cast<long long>(old_fence))));
  fence += steps * increment;
  DirectFunctionCall2(setval_oid, ObjectIdGetDatum(sequence), Int64GetDatum(fence));
  return fence;
}

}  // namespace idem
