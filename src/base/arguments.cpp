#include "base/arguments.hpp"

#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "pure/interval_rule.hpp"
#include "pg/message_text.hpp"

namespace idem {

namespace {

constexpr int max_key_chars = 255;
constexpr int max_scope_chars = 255;

// The length in characters, where it matters: a text of 1 to `max_chars`
// bytes has 1 to `max_chars` characters (a character takes at least one
// byte), so only a longer one is counted.
int char_length(const text *value, int max_chars) {
  int bytes = static_cast<int>(VARSIZE_ANY_EXHDR(value));
  if (bytes <= max_chars) return bytes;
  return pg_mbstrlen_with_len(VARDATA_ANY(value), bytes);
}

}  // namespace

int errdetail_key(const KeyName &name, const char *suffix) {
  StringInfoData detail;
  initStringInfo(&detail);
  if (name.scope != nullptr)
    appendStringInfo(&detail, "scope \"%s\"", message_text::excerpt(name.scope));
  if (name.key != nullptr)
    appendStringInfo(&detail, "%skey \"%s\"", detail.len > 0 ? ", " : "",
                     message_text::excerpt(name.key));
  if (suffix != nullptr) appendStringInfo(&detail, "%s%s", detail.len > 0 ? "; " : "", suffix);
  if (detail.len == 0) return 0;
  return errdetail_internal("%s", detail.data);
}

void require_scope_and_key(FunctionCallInfo fcinfo, text **scope, text **key, KeyName *name) {
  name->scope = nullptr;
  name->key = nullptr;
  if (PG_ARGISNULL(0))
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("idempotency scope must not be NULL"),
                    errdetail_key(*name, "scope is NULL"),
                    errhint("Pass the command domain the key belongs to, such as "
                            "'create_order'.")));
  *scope = PG_GETARG_TEXT_PP(0);
  name->scope = *scope;
  int scope_chars = char_length(*scope, max_scope_chars);
  if (scope_chars == 0)
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("idempotency scope must not be empty"), errdetail_key(*name),
                    errhint("Pass the command domain the key belongs to, such as "
                            "'create_order'.")));
  if (scope_chars > max_scope_chars)
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("idempotency scope is longer than 255 characters"), errdetail_key(*name),
                    errhint("Pass the command domain the key belongs to, such as "
                            "'create_order'.")));
  if (PG_ARGISNULL(1))
    // Worded for the HTTP caller the application passes this on to.
    ereport(ERROR, (errcode_of(sqlstate::key_invalid), errmsg("the Idempotency-Key is required"),
                    errdetail_key(*name, "key is NULL"),
                    errhint("Send the request again with an Idempotency-Key header, such as a "
                            "UUID.")));
  *key = PG_GETARG_TEXT_PP(1);
  name->key = *key;
  int key_chars = char_length(*key, max_key_chars);
  if (key_chars == 0)
    ereport(ERROR, (errcode_of(sqlstate::key_invalid),
                    errmsg("the Idempotency-Key must not be empty"), errdetail_key(*name),
                    errhint("Send the request again with an Idempotency-Key header, such as a "
                            "UUID.")));
  if (key_chars > max_key_chars)
    ereport(ERROR, (errcode_of(sqlstate::key_invalid),
                    errmsg("the Idempotency-Key is longer than 255 characters"),
                    errdetail_key(*name),
                    errhint("Use a key of 1 to 255 characters, such as a UUID.")));
}

text *require_text(FunctionCallInfo fcinfo, int argno, const char *sqlstate, const char *what,
                   const KeyName &name) {
  if (PG_ARGISNULL(argno) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(argno)) == 0)
    ereport(ERROR, (errcode_of(sqlstate),
                    errmsg("%s must not be %s", what, PG_ARGISNULL(argno) ? "NULL" : "empty"),
                    errdetail_key(name), errhint("Pass a non-empty %s.", what)));
  return PG_GETARG_TEXT_PP(argno);
}

int64 require_fence(FunctionCallInfo fcinfo, int argno, const KeyName &name) {
  if (PG_ARGISNULL(argno))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("fence must not be NULL"),
                    errdetail_key(name),
                    errhint("Pass the fence returned by the claim that made you the owner.")));
  int64 fence = PG_GETARG_INT64(argno);
  if (fence <= 0)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("fence must be positive, not %lld", static_cast<long long>(fence)),
                    errdetail_key(name),
                    errhint("Pass the fence returned by the claim that made you the owner.")));
  return fence;
}

bool require_bool(FunctionCallInfo fcinfo, int argno, const char *what, const KeyName &name) {
  if (PG_ARGISNULL(argno))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("%s must not be NULL", what),
                    errdetail_key(name), errhint("Pass true or false for %s.", what)));
  return PG_GETARG_BOOL(argno);
}

int32 require_batch_limit(FunctionCallInfo fcinfo, int argno) {
  KeyName none = {nullptr, nullptr};
  if (PG_ARGISNULL(argno))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("batch_limit must not be NULL"),
                    errdetail_key(none, "batch_limit is NULL"),
                    errhint("Pass a positive number of rows, such as 10000.")));
  int32 limit = PG_GETARG_INT32(argno);
  if (limit <= 0)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("batch_limit must be positive, not %d", limit),
                    errdetail_key(none, psprintf("batch_limit is %d", limit)),
                    errhint("Pass a positive number of rows, such as 10000.")));
  return limit;
}

bool optional_response_code(FunctionCallInfo fcinfo, int argno, bool required,
                            const KeyName &name, int32 *code) {
  if (PG_ARGISNULL(argno)) {
    if (required)
      ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("response_code must not be NULL"),
                      errdetail_key(name),
                      errhint("Pass the HTTP status the request answered, such as 201.")));
    return false;
  }
  *code = PG_GETARG_INT32(argno);
  if (*code < 100 || *code > 599)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("response_code %d is not an HTTP status code", *code),
                    errdetail_key(name), errhint("Pass an HTTP status between 100 and 599.")));
  return true;
}

bool interval_is_acceptable(const Interval *value, bool or_zero) {
  if (!compat::interval_is_finite(value)) return false;
  return or_zero ? interval_rule::is_not_negative(value->month, value->day, value->time)
                 : interval_rule::is_positive(value->month, value->day, value->time);
}

namespace {

// idem.interval_is_positive(value interval, or_zero boolean): the rule of
// interval_is_acceptable; NULL for NULL (a CHECK passes NULL, "not set here").
Datum interval_is_positive_sql(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  bool or_zero = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
  PG_RETURN_BOOL(interval_is_acceptable(PG_GETARG_INTERVAL_P(0), or_zero));
}

// A non-NULL interval argument accepted by interval_is_acceptable, or P4004:
// "<what> must be a finite interval" for 'infinity' and '-infinity'
// (PostgreSQL 17 on), since a lock or a retention that never ends would keep
// a key from ever going stale or expiring; "<what> must be a positive
// interval", with positive_hint, for one that is not positive (a null
// positive_hint: the hint of an argument a setting stands in for).
const Interval *require_acceptable_interval(FunctionCallInfo fcinfo, int argno, const char *what,
                                            const KeyName &name, const char *positive_hint) {
  const Interval *given = PG_GETARG_INTERVAL_P(argno);
  if (!compat::interval_is_finite(given))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("%s must be a finite interval", what),
                    errdetail_key(name),
                    errhint("Pass a positive %s such as '30 seconds', or NULL for the setting "
                            "idem.%s%s.",
                            what, what,
                            strcmp(what, "retention") == 0
                                ? " (idem.retention = -1 keeps keys forever)"
                                : "")));
  if (!interval_is_acceptable(given, false))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("%s must be a positive interval", what), errdetail_key(name),
                    positive_hint != nullptr
                        ? errhint("%s", positive_hint)
                        : errhint("Pass a positive %s such as '30 seconds', or NULL for the "
                                  "setting idem.%s.",
                                  what, what)));
  return given;
}

}  // namespace

bool interval_or_setting(FunctionCallInfo fcinfo, int argno, const char *what,
                         int setting_value, int64 setting_unit_usecs, TimestampTz now,
                         const KeyName &name, Interval *out) {
  if (PG_ARGISNULL(argno)) {
    if (setting_value < 0) return false;  // idem.retention = -1: keys never expire
    out->month = 0;
    out->day = 0;
    out->time = static_cast<int64>(setting_value) * setting_unit_usecs;
    return true;
  }
  *out = *require_acceptable_interval(fcinfo, argno, what, name, nullptr);
  return true;
}

TimestampTz require_positive_interval(FunctionCallInfo fcinfo, int argno, const char *what,
                                      TimestampTz now, const KeyName &name, const char *hint) {
  if (PG_ARGISNULL(argno))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("%s must not be NULL", what),
                    errdetail_key(name), errhint("%s", hint)));
  const Interval *given = require_acceptable_interval(fcinfo, argno, what, name, hint);
  // Positive by the rule, and still ending after now: in a time zone whose
  // clock moves by more than an hour, a day may be shorter.
  TimestampTz end = DatumGetTimestampTz(DirectFunctionCall2(
      timestamptz_pl_interval, TimestampTzGetDatum(now), IntervalPGetDatum(given)));
  if (end <= now)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("%s must be a positive interval", what), errdetail_key(name),
                    errhint("%s", hint)));
  return end;
}

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(interval_is_positive, idem::interval_is_positive_sql)

}  // extern "C"
