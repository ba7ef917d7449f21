// The estimates behind request_durations.hpp: a direct-mapped table of
// slots, each a tag (database and scope, hashed) and an exponentially
// weighted mean, read and written with atomics and no lock.
#include "waits/request_durations.hpp"

#include "pg/guard.hpp"
#include "policy/scope_owner.hpp"

extern "C" {
#include "common/hashfn.h"
#include "port/atomics.h"
}

namespace idem::request_durations {

namespace {

// A power of two; 16 bytes a slot.
constexpr uint32 slot_count = 1024;
// Each sample moves the mean by 1/8 of its distance: a handful of requests
// is enough to follow a change, one outlier does not dominate.
constexpr int64 weight_shift = 3;

struct Slot {
  pg_atomic_uint64 tag;   // 0: empty
  pg_atomic_uint64 mean;  // microseconds
};

Slot *shared_slots = nullptr;
// Without the preload: this backend's own table, zeroed like the shared one.
Slot local_slots[slot_count];
bool local_ready = false;

Slot *table() {
  if (shared_slots != nullptr) return shared_slots;
  if (!local_ready) {
    for (Slot &slot : local_slots) {
      pg_atomic_init_u64(&slot.tag, 0);
      pg_atomic_init_u64(&slot.mean, 0);
    }
    local_ready = true;
  }
  return local_slots;
}

uint64 tag_of(text *scope) {
  uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(scope)),
                                    static_cast<int>(VARSIZE_ANY_EXHDR(scope)), MyDatabaseId);
  return hash | 1;  // never 0, the empty tag
}

}  // namespace

void record(text *scope, TimestampTz claimed_at, TimestampTz now) {
  int64 sample = now - claimed_at;
  if (sample < 0) sample = 0;
  uint64 tag = tag_of(scope);
  Slot &slot = table()[tag & (slot_count - 1)];
  if (pg_atomic_read_u64(&slot.tag) != tag) {
    // Another scope's slot, or none: this scope starts over here.
    pg_atomic_write_u64(&slot.mean, static_cast<uint64>(sample));
    pg_atomic_write_u64(&slot.tag, tag);
    return;
  }
  int64 mean = static_cast<int64>(pg_atomic_read_u64(&slot.mean));
  mean += (sample - mean) / (int64(1) << weight_shift);
  pg_atomic_write_u64(&slot.mean, static_cast<uint64>(mean));
}

namespace {

// The scope's typical duration in microseconds; false when none is known.
bool typical(text *scope, int64 *microseconds) {
  uint64 tag = tag_of(scope);
  Slot &slot = table()[tag & (slot_count - 1)];
  if (pg_atomic_read_u64(&slot.tag) != tag) return false;
  *microseconds = static_cast<int64>(pg_atomic_read_u64(&slot.mean));
  // The slot may have been taken by another scope between the two reads.
  return pg_atomic_read_u64(&slot.tag) == tag;
}

}  // namespace

Size shared_size() { return sizeof(Slot) * slot_count; }

void attach_shared(void *memory, bool found) {
  shared_slots = static_cast<Slot *>(memory);
  if (found) return;
  for (uint32 i = 0; i < slot_count; ++i) {
    pg_atomic_init_u64(&shared_slots[i].tag, 0);
    pg_atomic_init_u64(&shared_slots[i].mean, 0);
  }
}

}  // namespace idem::request_durations

namespace idem {

namespace {

// idem.typical_duration(scope text) RETURNS interval (NULL when unknown).
Datum typical_duration(FunctionCallInfo fcinfo) {
  int64 microseconds;
  require_scope_owner(PG_GETARG_TEXT_PP(0));
  if (!request_durations::typical(PG_GETARG_TEXT_PP(0), &microseconds)) PG_RETURN_NULL();
  Interval *result = static_cast<Interval *>(palloc0(sizeof(Interval)));
  result->time = microseconds;
  PG_RETURN_INTERVAL_P(result);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(typical_duration, idem::typical_duration)

}  // extern "C"
