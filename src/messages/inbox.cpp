// The inbox's request path, idem.consume_once and idem.set_consumed_result
// (docs/contract.md "Consume-once for message consumers (the inbox)"; README
// "Message consumers"), in C so a replay costs one read through the primary
// key and a new message one kept INSERT. consume_once looks first, reading
// the message's row through the primary key directly (key_probe.hpp): a
// replay is that read and nothing else (no SPI, no lock on the row, no
// transaction id, no WAL). Only a message with no live row goes to the kept
// INSERT ... ON CONFLICT, which waits for a twin's in-flight transaction;
// when the twin committed, the insert returns nothing and the call looks
// again, now seeing the twin's row (a replay); when it rolled back, the
// insert goes in. The errors keep the words of the PL/pgSQL version they
// replace (sql/idem--1.0--1.1.sql, section inbox).
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "policy/scope_owner.hpp"
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
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("consumer must be 1 to 255 characters"),
                    errdetail("consumer was %s.", quoted(consumer, too_long_name_chars)),
                    errhint("Name the consumer (the scope of its message ids).")));
  if (!name_fits(message_id))
    ereport(ERROR, (errcode_of(sqlstate::key_invalid),
                    errmsg("message_id must be 1 to 255 characters"),
                    errdetail("consumer %s, message_id %s.", quoted(consumer),
                              quoted(message_id, too_long_name_chars)),
                    errhint("Pass the message's own id, as the broker delivers it.")));
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

[[noreturn]] void raise_hash_mismatch(const text *consumer, const text *message_id,
                                      const char *stored_hash, const text *message_hash) {
  ereport(ERROR,
          (errcode_of(sqlstate::message_mismatch),
           errmsg("message %s of consumer %s was consumed with a different message_hash",
                  quoted(message_id), quoted(consumer)),
           errdetail("consumer %s, message_id %s: stored hash %s, given %s.", quoted(consumer),
                     quoted(message_id), excerpt(stored_hash),
                     excerpt(message_hash)),
           errhint("A broker redelivers the same body under one id; a different body needs a new "
                   "message id.")));
}

// consume_once(consumer, message_id, message_hash, retention): true for the
// transaction that consumes the message, false for a replay; P4050 when the
// message was consumed with another hash.
Datum consume_once(FunctionCallInfo fcinfo) {
  const text *consumer = text_argument(fcinfo, 0);
  const text *message_id = text_argument(fcinfo, 1);
  const text *message_hash = text_argument(fcinfo, 2);
  require_message_name(consumer, message_id);
  if (message_hash == nullptr || VARSIZE_ANY_EXHDR(message_hash) == 0)
    ereport(ERROR, (errcode_of(sqlstate::request_hash_invalid),
                    errmsg("message_hash must not be empty"),
                    errdetail("consumer %s, message_id %s.", quoted(consumer),
                              quoted(message_id)),
                    errhint("Pass a fingerprint of the message body, for example "
                            "idem.request_hash(body).")));
  require_interval(fcinfo, 3, "retention", false,
                   "Pass a positive interval, or NULL for idem.inbox_retention.");
  require_scope_owner(consumer);  // the consumer is the scope of its messages
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
                              message_id, 2, probed_columns, Statement::probe_consumed_row,
                              session.caller_context, stored,
                              stored_null);
    if (found && !stored_null[1] && DatumGetTimestampTz(stored[1]) > now) {
      if (session.connected) spi_finish(&session);
      if (stored_null[0] || !same_text(DatumGetTextPP(stored[0]), message_hash))
        raise_hash_mismatch(consumer, message_id,
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
  ereport(ERROR, (errcode_of(sqlstate::internal),
                  errmsg("consume_once could not settle message %s of consumer %s",
                         quoted(message_id), quoted(consumer)),
                  errdetail("The message changed under two attempts in a row."),
                  errhint("Retry the transaction.")));
}

// set_consumed_result(consumer, message_id, result_ref_type, result_ref_id):
// P4020 when the message is not consumed (or expired).
Datum set_consumed_result(FunctionCallInfo fcinfo) {
  const text *consumer = text_argument(fcinfo, 0);
  const text *message_id = text_argument(fcinfo, 1);
  require_message_name(consumer, message_id);
  require_scope_owner(consumer);
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
    ereport(ERROR, (errcode_of(sqlstate::key_not_found),
                    errmsg("message %s of consumer %s is not consumed", quoted(message_id),
                           quoted(consumer)),
                    errdetail("consumer %s, message_id %s: no live consumed message.",
                              quoted(consumer), quoted(message_id)),
                    errhint("Call idem.consume_once first, in the same transaction.")));
  PG_RETURN_VOID();
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(consume_once, idem::consume_once)
IDEM_SQL_FUNCTION(set_consumed_result, idem::set_consumed_result)

}  // extern "C"
