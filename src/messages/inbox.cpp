// The inbox's request path (inbox.hpp). consume_once looks first, reading
// the message's row through the primary key directly (key_probe.hpp): a
// replay is that read and nothing else (no SPI, no lock on the row, no
// transaction id, no WAL). Only a message with no live row goes to the kept
// INSERT ... ON CONFLICT, which waits for a twin's in-flight transaction;
// when the twin committed, the insert returns nothing and the call looks
// again, now seeing the twin's row (a replay); when it rolled back, the
// insert goes in. The errors keep the words of the PL/pgSQL version they
// replace (sql/idem--1.0--1.1.sql, section inbox).
#include "messages/inbox.hpp"

#include "keys/arguments.hpp"
#include "pure/errors.hpp"
#include "keys/key_probe.hpp"
#include "messages/message_arguments.hpp"
#include "messages/message_maintenance.hpp"
#include "policy/scope_policy.hpp"
#include "pg/spi_session.hpp"

namespace idem {

namespace {

using namespace message_arguments;

// Twice at most: a row purged between the insert's conflict and the re-read
// is absent, and the second pass inserts it.
constexpr int max_consume_steps = 2;

// consumer and message_id (P4000, P4001).
void require_message_name(const text *consumer, const text *message_id) {
  if (!name_fits(consumer))
    throw_error(sqlstate::scope_invalid, "consumer must be 1 to 255 characters",
                psprintf("consumer was %s.", literal(consumer, detail_name_chars)),
                "Name the consumer (the scope of its message ids).");
  if (!name_fits(message_id))
    throw_error(sqlstate::key_invalid, "message_id must be 1 to 255 characters",
                psprintf("consumer %s, message_id %s.", literal(consumer),
                         literal(message_id, detail_name_chars)),
                "Pass the message's own id, as the broker delivers it.");
}

// The expiry of a message consumed at `now`: the argument, else the
// consumer's scope policy (idem.scope_policy: retention, or keep_forever),
// else idem.inbox_retention (-1: forever).
TimestampTz message_expiry(FunctionCallInfo fcinfo, const text *consumer, TimestampTz now) {
  Interval retention;
  if (!PG_ARGISNULL(3)) {
    retention = *PG_GETARG_INTERVAL_P(3);
  } else {
    const ScopePolicy *policy = scope_policy_for(consumer);
    if (policy != nullptr && policy->keep_forever) return DT_NOEND;
    if (policy != nullptr && policy->has_retention) {
      retention.time = policy->retention.time;
      retention.day = policy->retention.day;
      retention.month = policy->retention.month;
    } else {
      int seconds = inbox_retention_seconds();
      if (seconds < 0) return DT_NOEND;
      retention.time = static_cast<int64>(seconds) * USECS_PER_SEC;
      retention.day = 0;
      retention.month = 0;
    }
  }
  return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now),
                                                 IntervalPGetDatum(&retention)));
}

// A given retention must be positive and finite (interval_is_acceptable): P4004.
void require_retention(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(3)) return;
  Interval *given = PG_GETARG_INTERVAL_P(3);
  if (interval_is_acceptable(given, false)) return;
  throw_error(sqlstate::bad_argument, "retention must be positive and finite",
              psprintf("retention was %s.", DatumGetCString(DirectFunctionCall1(
                                                interval_out, IntervalPGetDatum(given)))),
              "Pass a positive interval, or NULL for idem.inbox_retention.");
}

[[noreturn]] void throw_hash_mismatch(const text *consumer, const text *message_id,
                                      const char *stored_hash, const text *message_hash) {
  throw_error(
      sqlstate::message_mismatch,
      psprintf("message %s of consumer %s was consumed with a different message_hash",
               literal(message_id), literal(consumer)),
      psprintf("consumer %s, message_id %s: stored hash %s, given %s.", literal(consumer),
               literal(message_id), excerpt_text(stored_hash),
               message_text::excerpt(message_hash)),
      "A broker redelivers the same body under one id; a different body needs a new message id.");
}

}  // namespace

Datum consume_once(FunctionCallInfo fcinfo) {
  const text *consumer = text_argument(fcinfo, 0);
  const text *message_id = text_argument(fcinfo, 1);
  const text *message_hash = text_argument(fcinfo, 2);
  require_message_name(consumer, message_id);
  if (message_hash == nullptr || VARSIZE_ANY_EXHDR(message_hash) == 0)
    throw_error(sqlstate::request_hash_invalid, "message_hash must not be empty",
                psprintf("consumer %s, message_id %s.", literal(consumer), literal(message_id)),
                "Pass a fingerprint of the message body, for example idem.request_hash(body).");
  require_retention(fcinfo);
  TimestampTz now = GetCurrentStatementStartTimestamp();
  // The expiry only matters to a new message, but the policy cache may need
  // its own SPI session to reload, so it is resolved before connecting.
  TimestampTz expiry = message_expiry(fcinfo, consumer, now);

  static const char *const probed_columns[] = {"message_hash", "expires_at"};
  Datum insert_params[5] = {PointerGetDatum(consumer), PointerGetDatum(message_id),
                            PointerGetDatum(message_hash), TimestampTzGetDatum(now),
                            TimestampTzGetDatum(expiry)};
  // Connected at the first insert; the probe's copies go to the caller's
  // context, which outlives the connection.
  SpiSession session = {CurrentMemoryContext, false};
  for (int step = 0; step < max_consume_steps; ++step) {
    Datum stored[2];
    bool stored_null[2];
    bool found = probe_by_key(catalog_cache::IdemRelation::consumed_message,
                              catalog_cache::IdemRelation::consumed_message_pkey, consumer,
                              message_id, 2, probed_columns, session.caller_context, stored,
                              stored_null);
    if (found && !stored_null[1] && DatumGetTimestampTz(stored[1]) > now) {
      if (session.connected) spi_finish(&session);
      if (stored_null[0] || !same_text(DatumGetTextPP(stored[0]), message_hash))
        throw_hash_mismatch(consumer, message_id,
                            stored_null[0] ? "NULL" : TextDatumGetCString(stored[0]),
                            message_hash);
      PG_RETURN_BOOL(false);
    }
    if (!session.connected) spi_connect(&session);
    if (spi_run(&session, Statement::inbox_insert, insert_params, nullptr) > 0) {
      spi_finish(&session);
      PG_RETURN_BOOL(true);
    }
  }
  spi_finish(&session);
  throw_error(sqlstate::internal,
              psprintf("consume_once could not settle message %s of consumer %s",
                       literal(message_id), literal(consumer)),
              "The message changed under two attempts in a row.", "Retry the transaction.");
}

Datum set_consumed_result(FunctionCallInfo fcinfo) {
  const text *consumer = text_argument(fcinfo, 0);
  const text *message_id = text_argument(fcinfo, 1);
  require_message_name(consumer, message_id);
  Datum params[5] = {PointerGetDatum(consumer), PointerGetDatum(message_id),
                     PG_ARGISNULL(2) ? Datum(0) : PG_GETARG_DATUM(2),
                     PG_ARGISNULL(3) ? Datum(0) : PG_GETARG_DATUM(3),
                     TimestampTzGetDatum(GetCurrentStatementStartTimestamp())};
  char nulls[6] = "     ";
  if (PG_ARGISNULL(2)) nulls[2] = 'n';
  if (PG_ARGISNULL(3)) nulls[3] = 'n';
  SpiSession session;
  spi_connect(&session);
  uint64 updated = spi_run(&session, Statement::inbox_set_result, params, nulls);
  spi_finish(&session);
  if (updated == 0)
    throw_error(sqlstate::key_not_found,
                psprintf("message %s of consumer %s is not consumed", literal(message_id),
                         literal(consumer)),
                psprintf("consumer %s, message_id %s: no live consumed message.", literal(consumer),
                         literal(message_id)),
                "Call idem.consume_once first, in the same transaction.");
  PG_RETURN_VOID();
}

}  // namespace idem
