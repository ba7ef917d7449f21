// The shared-memory table behind stats.hpp: one row per database, claimed by
// the database's first counted event, plus one overflow row.
#include "base/stats.hpp"


extern "C" {
#include "storage/spin.h"
}

namespace idem {
namespace stats {

namespace {

struct SharedCounters {
  slock_t claim_lock;  // serialises claiming a row, never held while counting
  DatabaseCounters overflow;
  DatabaseCounters databases[max_databases];
};

SharedCounters *shared = nullptr;  // set in every process by attach_shared

void init_row(DatabaseCounters *row, TimestampTz now) {
  pg_atomic_init_u32(&row->datid, InvalidOid);
  for (auto &counter : row->counters) pg_atomic_init_u64(&counter, 0);
  pg_atomic_init_u64(&row->last_worker_round, 0);
  pg_atomic_init_u64(&row->stats_reset, static_cast<uint64>(now));
}

// Claiming a row: only under claim_lock, and only a row nobody counts into
// (free, or of a dropped database), so zeroing it races with no increment.
void take_row(DatabaseCounters *row, Oid database, TimestampTz now) {
  for (auto &counter : row->counters) pg_atomic_write_u64(&counter, 0);
  pg_atomic_write_u64(&row->last_worker_round, 0);
  pg_atomic_write_u64(&row->stats_reset, static_cast<uint64>(now));
  pg_atomic_write_u32(&row->datid, database);
}

DatabaseCounters *find_row_locked(Oid database) {
  for (auto &row : shared->databases)
    if (pg_atomic_read_u32(&row.datid) == database) return &row;
  return nullptr;
}

// A database's row, a free one, or null; never blocks on anything but the spinlock.
DatabaseCounters *find_or_claim_free_row(Oid database, TimestampTz now) {
  SpinLockAcquire(&shared->claim_lock);
  DatabaseCounters *row = find_row_locked(database);
  if (row == nullptr) {
    for (auto &candidate : shared->databases) {
      if (pg_atomic_read_u32(&candidate.datid) == InvalidOid) {
        take_row(&candidate, database, now);
        row = &candidate;
        break;
      }
    }
  }
  SpinLockRelease(&shared->claim_lock);
  return row;
}

// The table is full: take over the row of a database that no longer exists.
// The catalog is read outside the spinlock; the row is taken only if it
// still belongs to that dropped database (and ours has none by then).
DatabaseCounters *recycle_dropped_database_row(Oid database, TimestampTz now) {
  if (!IsTransactionState()) return nullptr;  // the catalog cannot be read
  for (auto &candidate : shared->databases) {
    Oid owner = pg_atomic_read_u32(&candidate.datid);
    if (owner == InvalidOid || SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(owner)))
      continue;
    SpinLockAcquire(&shared->claim_lock);
    DatabaseCounters *row = find_row_locked(database);
    if (row == nullptr && pg_atomic_read_u32(&candidate.datid) == owner) {
      take_row(&candidate, database, now);
      row = &candidate;
    }
    SpinLockRelease(&shared->claim_lock);
    if (row != nullptr) return row;
  }
  return nullptr;
}

}  // namespace

DatabaseCounters *this_database = nullptr;

Size shared_size() { return sizeof(SharedCounters); }

void attach_shared(void *memory, bool found) {
  shared = static_cast<SharedCounters *>(memory);
  if (found) return;
  TimestampTz now = GetCurrentTimestamp();
  SpinLockInit(&shared->claim_lock);
  init_row(&shared->overflow, now);
  for (auto &row : shared->databases) init_row(&row, now);
}

bool available() { return shared != nullptr; }

DatabaseCounters *row_for(Oid database) {
  if (shared == nullptr) return nullptr;
  if (database == InvalidOid) return &shared->overflow;
  TimestampTz now = GetCurrentTimestamp();
  DatabaseCounters *row = find_or_claim_free_row(database, now);
  if (row == nullptr) row = recycle_dropped_database_row(database, now);
  return row != nullptr ? row : &shared->overflow;
}

void count_slow(Counter counter, uint64 amount) {
  if (shared == nullptr) return;
  this_database = row_for(MyDatabaseId);
  pg_atomic_fetch_add_u64(&this_database->counters[static_cast<int>(counter)], amount);
}

void count_worker_round(TimestampTz round_end) {
  count(Counter::worker_rounds);
  if (this_database != nullptr)
    pg_atomic_write_u64(&this_database->last_worker_round, static_cast<uint64>(round_end));
}

void reset_row(DatabaseCounters *row, TimestampTz now) {
  // Not atomic as a whole: an event counted during the reset may survive it.
  for (auto &counter : row->counters) pg_atomic_write_u64(&counter, 0);
  pg_atomic_write_u64(&row->last_worker_round, 0);
  pg_atomic_write_u64(&row->stats_reset, static_cast<uint64>(now));
}

DatabaseCounters *rows_begin() { return shared == nullptr ? nullptr : shared->databases; }
DatabaseCounters *overflow_row() { return shared == nullptr ? nullptr : &shared->overflow; }

}  // namespace stats
}  // namespace idem
