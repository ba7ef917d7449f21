// Fences for existing rows (fence.hpp).
#include "keys/fence.hpp"

#include "keys/bound_commit.hpp"
#include "pure/errors.hpp"

extern "C" {
#include "catalog/pg_sequence.h"
#include "storage/lmgr.h"
}

namespace idem {

namespace {

Oid idem_relation(const char *name) {
  Oid oid = get_relname_relid(name, get_namespace_oid("idem", false));
  if (!OidIsValid(oid))
    ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("idem.%s does not exist", name),
                    errhint("Run ALTER EXTENSION idem UPDATE, or reinstall the library that "
                            "matches the extension.")));
  return oid;
}

int64 increment_of(Oid sequence) {
  HeapTuple tuple = SearchSysCache1(SEQRELID, ObjectIdGetDatum(sequence));
  if (!HeapTupleIsValid(tuple))
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.%s is not a sequence", get_rel_name(sequence))));
  int64 increment = reinterpret_cast<Form_pg_sequence>(GETSTRUCT(tuple))->seqincrement;
  ReleaseSysCache(tuple);
  // A sequence that counts down, or one step, leaves nothing to keep
  // congruent: the next value above the row's is the fence.
  return increment <= 1 ? 1 : increment;
}

int64 draw(Oid sequence) {
  return DatumGetInt64(DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(sequence)));
}

void move_to(Oid sequence, int64 value) {
  DirectFunctionCall2(setval_oid, ObjectIdGetDatum(sequence), Int64GetDatum(value));
}

// The sequence's last value, or false when it has none (never drawn).
bool last_value_of(Oid sequence, int64 *value) {
  LOCAL_FCINFO(fcinfo, 1);
  InitFunctionCallInfoData(*fcinfo, nullptr, 1, InvalidOid, nullptr, nullptr);
  fcinfo->args[0].value = ObjectIdGetDatum(sequence);
  fcinfo->args[0].isnull = false;
  Datum last = pg_sequence_last_value(fcinfo);
  if (fcinfo->isnull) return false;
  *value = DatumGetInt64(last);
  return true;
}

// The smallest value above old_fence congruent to drawn modulo increment.
int64 congruent_above(int64 drawn, int64 old_fence, int64 increment, Oid sequence) {
  int64 steps = (old_fence - drawn) / increment + 1;
  if (steps > (PG_INT64_MAX - drawn) / increment)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.%s cannot rise above fence %lld", get_rel_name(sequence),
                           static_cast<long long>(old_fence))));
  return drawn + steps * increment;
}

// On Citus (the lane steps by more than 1, idem.citus_node_setup): the
// lane's next value, moved up to the first of its residue above old_fence.
// Only jumpers draw from or set the lane, one at a time, so the setval
// moves it up past every value it issued: it never issues one twice.
int64 jump_in_lane(Oid lane, int64 increment, int64 old_fence) {
  bound_commit::note_jump_lane_drawn();
  int64 fence = draw(lane);
  if (fence > old_fence) return fence;
  fence = congruent_above(fence, old_fence, increment, lane);
  move_to(lane, fence);
  return fence;
}

// On one server the lane is unused: idem.fence_seq itself is behind the
// row (set back by hand, or restored without it). It is moved to the
// target only while its last value is still below: never back over what
// another jumper set. An ordinary claim's nextval is not serialised with
// this, so values drawn in the instant between the read and the setval
// could be issued again (docs/internals.md, "On Citus"); on Citus the lane
// leaves no such window.
int64 jump_in_sequence(Oid sequence, int64 drawn, int64 old_fence) {
  int64 fence = congruent_above(drawn, old_fence, increment_of(sequence), sequence);
  int64 last = 0;
  if (last_value_of(sequence, &last) && last >= fence) return draw(sequence);
  move_to(sequence, fence);
  return fence;
}

}  // namespace

int64 fence_above(int64 old_fence) {
  Oid sequence = idem_relation("fence_seq");
  int64 fence = draw(sequence);
  if (fence > old_fence) return fence;
  Oid lock = get_relname_relid("fence_jump_lock", get_namespace_oid("idem", false));
  // A schema still at 1.2 has no lane and no lock: jump in idem.fence_seq
  // as 1.2 did.
  if (!OidIsValid(lock)) return jump_in_sequence(sequence, fence, old_fence);
  Oid lane = idem_relation("fence_jump_seq");
  // Serialises jumpers only. Not a lock of the sequences: every nextval
  // holds RowExclusiveLock on its sequence until its transaction ends, so a
  // lock conflicting with that would wait for every claim in flight (and so
  // would ExclusiveLock on the lane, held by the last jumper's transaction).
  // Nobody else locks this table: it has no rows and no grants.
  LockRelationOid(lock, ExclusiveLock);
  int64 increment = increment_of(lane);
  fence = increment > 1 ? jump_in_lane(lane, increment, old_fence)
                        : jump_in_sequence(sequence, fence, old_fence);
  // Sequence calls are not transactional: what they drew and set stays
  // whatever this transaction does next, so the lock guards nothing after
  // them and the next jumper need not wait for this transaction's end.
  UnlockRelationOid(lock, ExclusiveLock);
  return fence;
}

}  // namespace idem
