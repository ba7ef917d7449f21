// The rules of idem.consumed_message and idem.outbox_event rows, as the
// functions their tables' one CHECK constraint each calls (sql/idem--1.0--1.1.sql,
// the comment before idem.consumed_message_invariants_hold). One CHECK calling
// one C function rather than a CHECK per rule, because PostgreSQL reads every
// CHECK back from its stored text and compiles it at each INSERT and UPDATE
// (bench/README.md gives the cost). Each returns true, or raises 23514 naming
// the rule (the names of the CHECKs it stands for).
//
// NOT NULL stays on the columns, and PostgreSQL checks it before any CHECK,
// so a NULL reaches these functions only for a nullable column, where the
// rules say what NULL means.
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "messages/message_arguments.hpp"
#include "keys/row_check.hpp"
#include "pure/row_invariants.hpp"

namespace idem {

namespace {

using message_arguments::name_fits;
using message_arguments::text_argument;
// The row breaks `rule`: 23514, reported at the caller, which judged it.
[[noreturn]] void raise_broken(const char *rule, const char *detail, const char *hint,
                               SourceLocation where = SourceLocation::here()) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::check_violation),
                          errmsg("new row violates idem invariant \"%s\"", rule),
                          errdetail_internal("%s", detail), errhint("%s", hint)));
}

bool present(const text *value) { return value == nullptr || VARSIZE_ANY_EXHDR(value) > 0; }

bool name_fits_or_null(const text *value) { return value == nullptr || name_fits(value); }

// The enum label of argument argno, or nullptr for NULL.
const char *label_argument(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return nullptr;
  return DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(argno)));
}

bool label_is(const char *label, const char *expected) {
  return label != nullptr && strcmp(label, expected) == 0;
}

// The columns the rules' arguments come from (row_check.hpp).
const char *const consumed_message_columns[] = {"consumer", "message_id", "message_hash",
                                                "consumed_at", "expires_at"};
RowColumns consumed_message_row = {consumed_message_columns, 5, InvalidOid, 0, {}};
const char *const outbox_event_columns[] = {"scope", "key", "event_type", "status",
                                            "leased_until", "lease_fence", "published_at"};
RowColumns outbox_event_row = {outbox_event_columns, 7, InvalidOid, 0, {}};

// idem.consumed_message: consumer and message_id 1 to 255 characters,
// message_hash not empty, expires_at after consumed_at. Arguments: consumer,
// message_id, message_hash, consumed_at, expires_at.
Datum consumed_message_invariants_hold(FunctionCallInfo fcinfo) {
  if (!name_fits_or_null(text_argument(fcinfo, 0)))
    raise_broken("consumer_length", "The consumer is 1 to 255 characters long.",
                 "idem.consume_once refuses any other consumer (P4000).");
  if (!name_fits_or_null(text_argument(fcinfo, 1)))
    raise_broken("message_id_length", "The message_id is 1 to 255 characters long.",
                 "idem.consume_once refuses any other message id (P4001).");
  if (!present(text_argument(fcinfo, 2)))
    raise_broken("message_hash_present", "message_hash is not empty.",
                 "Store the fingerprint the message was consumed with.");
  if (!PG_ARGISNULL(3) && !PG_ARGISNULL(4) &&
      !(PG_GETARG_TIMESTAMPTZ(4) > PG_GETARG_TIMESTAMPTZ(3)))
    raise_broken("expires_after_consumption", "expires_at is later than consumed_at.",
                 "A message kept forever has expires_at = 'infinity'.");
  PG_RETURN_BOOL(true);
}

// idem.outbox_event: scope and key 1 to 255 characters, event_type not
// empty, a leased event has its lease, a published one its date. Arguments:
// scope, key, event_type, status, leased_until, lease_fence, published_at.
Datum outbox_event_invariants_hold(FunctionCallInfo fcinfo) {
  if (!name_fits_or_null(text_argument(fcinfo, 0)))
    raise_broken("outbox_scope_length", "The scope is 1 to 255 characters long.",
                 "idem.outbox_put refuses any other scope (P4000).");
  if (!name_fits_or_null(text_argument(fcinfo, 1)))
    raise_broken("outbox_key_length", "The key is 1 to 255 characters long.",
                 "idem.outbox_put refuses any other key (P4001).");
  if (!present(text_argument(fcinfo, 2)))
    raise_broken("outbox_event_type_present", "event_type is not empty.",
                 "Name the event, for example 'order_paid'.");
  const char *status = label_argument(fcinfo, 3);
  if (status != nullptr) {
    bool has_lease = !PG_ARGISNULL(4) && !PG_ARGISNULL(5);
    if (label_is(status, "leased") != has_lease)
      raise_broken("outbox_leased_has_lease",
                   "An event is 'leased' exactly when it has leased_until and lease_fence.",
                   "Only idem.outbox_lease leases an event; publishing or failing it ends the lease.");
    if (label_is(status, "published") != !PG_ARGISNULL(6))
      raise_broken("outbox_published_is_dated",
                   "An event is 'published' exactly when it has published_at.",
                   "Only idem.outbox_published publishes an event.");
  }
  PG_RETURN_BOOL(true);
}

// The same rules over a whole idem.consumed_message / idem.outbox_event row: what
// the tables' CHECK constraints call (row_check.hpp).
Datum consumed_message_row_invariants_hold(FunctionCallInfo fcinfo) {
  return call_with_row_columns(fcinfo, &consumed_message_row, consumed_message_invariants_hold);
}

Datum outbox_event_row_invariants_hold(FunctionCallInfo fcinfo) {
  return call_with_row_columns(fcinfo, &outbox_event_row, outbox_event_invariants_hold);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(consumed_message_invariants_hold, idem::consumed_message_invariants_hold)
IDEM_SQL_FUNCTION(outbox_event_invariants_hold, idem::outbox_event_invariants_hold)
IDEM_SQL_FUNCTION(consumed_message_row_invariants_hold, idem::consumed_message_row_invariants_hold)
IDEM_SQL_FUNCTION(outbox_event_row_invariants_hold, idem::outbox_event_row_invariants_hold)

}  // extern "C"
