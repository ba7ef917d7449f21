#include "messages/message_maintenance.hpp"

#include "keys/maintenance.hpp"
#include "pg/catalog_cache.hpp"
#include "pg/citus.hpp"
#include "pg/settings.hpp"

namespace idem {

namespace {
int inbox_retention_s;
int outbox_retention_s;
int outbox_max_attempts;
int outbox_backoff_base_ms;
int outbox_backoff_max_ms;

bool check_message_retention(int *value, void **, GucSource) {
  return retention_is_acceptable(*value,
                                 "The retention must be positive, or -1 to keep rows forever.");
}
}  // namespace

bool is_message_purge(Statement statement) {
  for (Statement purge : message_purges)
    if (purge == statement) return true;
  return false;
}

uint64 run_message_purge_batch(SpiSession *session, Statement statement, int32 limit) {
  require_writable_for_maintenance(statement);
  Datum params[3] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit), Datum(0)};
  // The SQL function would read the whole distributed inbox FOR UPDATE,
  // which Citus refuses: its batch runs on this node's shards instead.
  if (statement == Statement::purge_consumed &&
      citus::is_citus_table(catalog_cache::IdemRelation::consumed_message))
    return purge_consumed_on_shards(session, params, limit);
  (void)spi_run(session, statement, params, nullptr);
  bool isnull;
  int64 deleted = spi_int64(session, 0, 1, &isnull);
  return isnull ? 0 : static_cast<uint64>(deleted);
}

int inbox_retention_seconds() { return inbox_retention_s; }

// The defaults here are repeated in sql/idem--1.0--1.1.sql (section inbox),
// which reads them before this backend has loaded the library.
void define_message_settings() {
  DefineCustomIntVariable(
      "idem.inbox_retention", "How long a consumed message is remembered.",
      "Used when consume_once is called with retention NULL; -1 remembers forever.",
      &inbox_retention_s, 7 * 86400, -1, INT_MAX, PGC_USERSET, GUC_UNIT_S,
      check_message_retention, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.outbox_retention", "How long a published outbox event is kept.",
      "The worker purges published events older than this; -1 keeps them forever.",
      &outbox_retention_s, 7 * 86400, -1, INT_MAX, PGC_SIGHUP, GUC_UNIT_S,
      check_message_retention, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.outbox_max_attempts", "Delivery attempts before an outbox event is dead.", nullptr,
      &outbox_max_attempts, 10, 1, INT_MAX, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.outbox_backoff_base", "Backoff after an outbox event's first failed delivery.",
      "Doubles with every further failure, up to idem.outbox_backoff_max, with jitter.",
      &outbox_backoff_base_ms, 1000, 1, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "idem.outbox_backoff_max", "The longest backoff between two deliveries of an event.",
      nullptr, &outbox_backoff_max_ms, 600000, 1, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr,
      nullptr, nullptr);
}

}  // namespace idem
