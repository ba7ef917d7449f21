// The per-backend cache of idem.scope_policy. The table's statement trigger
// sends a relcache invalidation of the table (CacheInvalidateRelcache), which
// reaches this backend at its own command end and every other backend when
// the writing transaction commits (or, undone, when it aborts); the catalog
// cache counts it (catalog_cache::relation_changes), and the next claim that
// sees a new count reloads. A claim never queries the table or the catalogs
// otherwise.
#include "policy/scope_policy.hpp"

#include "pure/errors.hpp"
#include "pg/catalog_cache.hpp"
#include "pg/guard.hpp"
#include "pg/settings.hpp"
#include "pg/spi_session.hpp"

extern "C" {
#include "commands/trigger.h"
}

namespace idem {

namespace {

constexpr int policy_columns = 6;

// The count of invalidations that may concern the table (while the table is
// missing, a 1.0 schema or no extension, any relation may be it being
// created) the cache reflects; 0: never loaded. A load is kept only if no
// invalidation arrived while it ran (it may have read the table before that
// change committed).
uint64 loaded_at = 0;

uint64 policy_changes() {
  return catalog_cache::relation_changes(catalog_cache::IdemRelation::scope_policy);
}

PolicyInterval interval_datum(Datum value) {
  const Interval *interval = DatumGetIntervalP(value);
  return PolicyInterval{interval->time, interval->day, interval->month};
}

void load_policies() {
  uint64 started_at = policy_changes();
  begin_policies();
  if (OidIsValid(catalog_cache::relation_oid(catalog_cache::IdemRelation::scope_policy))) {
    MemoryContext load_context =
        AllocSetContextCreate(CurrentMemoryContext, "idem policy load", ALLOCSET_DEFAULT_SIZES);
    MemoryContext previous = MemoryContextSwitchTo(load_context);
    SpiSession session;
    spi_connect(&session);
    // Under a snapshot taken now, after started_at was read: the cache
    // outlives this transaction, so it must not hold what an older snapshot
    // (a REPEATABLE READ transaction's) saw. A change committed before the
    // snapshot is in it; one committed after sends its invalidation after
    // it committed, so after started_at, and the next call loads again.
    uint64 rows = spi_run_latest(&session, Statement::policy_load, nullptr, nullptr);
    for (uint64 row = 0; row < rows; ++row) {
      Datum values[policy_columns];
      bool nulls[policy_columns];
      spi_copy_row(&session, row, policy_columns, values, nulls);
      ScopePolicy policy = {};
      policy.has_lock_timeout = !nulls[1];
      if (!nulls[1]) policy.lock_timeout = interval_datum(values[1]);
      policy.has_retention = !nulls[2];
      if (!nulls[2]) policy.retention = interval_datum(values[2]);
      policy.keep_forever = !nulls[3] && DatumGetBool(values[3]);
      policy.max_attempts = nulls[4] ? 0 : DatumGetInt32(values[4]);
      policy.bind_lock_to_session = nulls[5] ? -1 : (DatumGetBool(values[5]) ? 1 : 0);
      const text *scope = DatumGetTextPP(values[0]);
      add_policy(VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope), policy);
    }
    spi_finish(&session);
    MemoryContextSwitchTo(previous);
    MemoryContextDelete(load_context);
  }
  publish_policies();
  // An invalidation during the load: what was read may predate a commit,
  // so the next call loads again.
  if (policy_changes() == started_at) loaded_at = started_at;
}

void from_policy(const PolicyInterval &value, Interval *out) {
  out->time = value.time;
  out->day = value.day;
  out->month = value.month;
}

}  // namespace

const ScopePolicy *scope_policy_for(const text *scope) {
  if (loaded_at != policy_changes()) load_policies();
  return find_policy(VARDATA_ANY(scope), VARSIZE_ANY_EXHDR(scope));
}

void resolve_claim_policy(FunctionCallInfo fcinfo, int lock_argno, const text *scope,
                          TimestampTz now, const KeyName &name, ClaimPolicy *out) {
  const ScopePolicy *policy = scope_policy_for(scope);
  int retention_argno = lock_argno + 1;
  if (PG_ARGISNULL(lock_argno) && policy != nullptr && policy->has_lock_timeout)
    from_policy(policy->lock_timeout, &out->lock_timeout);
  else
    interval_or_setting(fcinfo, lock_argno, "lock_timeout", settings.lock_timeout_ms, 1000,
                        now, name, &out->lock_timeout);
  if (PG_ARGISNULL(retention_argno) && policy != nullptr && policy->keep_forever) {
    out->expires = false;
  } else if (PG_ARGISNULL(retention_argno) && policy != nullptr && policy->has_retention) {
    from_policy(policy->retention, &out->retention);
    out->expires = true;
  } else {
    out->expires = interval_or_setting(fcinfo, retention_argno, "retention", settings.retention_s,
                                       USECS_PER_SEC, now, name, &out->retention);
  }
  out->max_attempts = policy == nullptr ? 0 : policy->max_attempts;
}

bool attempts_exhausted(const ClaimPolicy &policy, int32 attempt_count) {
  return policy.max_attempts > 0 && attempt_count >= policy.max_attempts;
}

bool bind_lock_to_session_for(const text *scope, bool setting_value) {
  const ScopePolicy *policy = scope_policy_for(scope);
  if (policy == nullptr || policy->bind_lock_to_session < 0) return setting_value;
  return policy->bind_lock_to_session == 1;
}

// The statement trigger of idem.scope_policy: invalidates every backend's cache.
Datum scope_policy_changed(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem.scope_policy_changed() must be called as a trigger"),
                    errdetail("it was called directly"),
                    errhint("Only the trigger on idem.scope_policy calls it.")));
  auto *trigger_data = reinterpret_cast<TriggerData *>(fcinfo->context);
  CacheInvalidateRelcache(trigger_data->tg_relation);
  return PointerGetDatum(nullptr);
}

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(scope_policy_changed, idem::scope_policy_changed)

}  // extern "C"
