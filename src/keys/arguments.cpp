#include "keys/arguments.hpp"

#include <string>

#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "pure/interval_rule.hpp"
#include "pg/message_text.hpp"

namespace idem {

namespace {

constexpr int max_key_chars = 255;
constexpr int max_scope_chars = 255;

std::string describe(const KeyName &name) {
  std::string detail;
  if (name.scope != nullptr) detail += std::string("scope \"") + name.scope + "\"";
  if (name.key != nullptr) {
    if (!detail.empty()) detail += ", ";
    detail += std::string("key \"") + name.key + "\"";
  }
  return detail;
}

int char_length(const text *value) {
  return pg_mbstrlen_with_len(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

// An over-long name is cut for messages (message_text.hpp), so a 1 MB key
// does not become a 1 MB log line.
const char *printable(const text *value) { return message_text::excerpt(value); }

}  // namespace

void throw_key_error(const char *sqlstate, const char *message, const KeyName &name,
                     const char *hint, const char *detail_suffix) {
  std::string detail = describe(name);
  if (detail_suffix != nullptr) detail += detail.empty() ? detail_suffix : std::string("; ") + detail_suffix;
  throw Error(sqlstate, message, detail, hint);
}

void require_scope_and_key(FunctionCallInfo fcinfo, text **scope, text **key, KeyName *name) {
  name->scope = nullptr;
  name->key = nullptr;
  if (PG_ARGISNULL(0))
    throw_key_error(sqlstate::scope_invalid, "idempotency scope must not be NULL", *name,
                    "Pass the command domain the key belongs to, such as 'create_order'.",
                    "scope is NULL");
  *scope = PG_GETARG_TEXT_PP(0);
  name->scope = printable(*scope);
  int scope_chars = char_length(*scope);
  if (scope_chars == 0 || scope_chars > max_scope_chars)
    throw_key_error(sqlstate::scope_invalid,
                    scope_chars == 0 ? "idempotency scope must not be empty"
                                     : "idempotency scope is longer than 255 characters",
                    *name, "Pass the command domain the key belongs to, such as 'create_order'.");
  if (PG_ARGISNULL(1))
    // Worded for the HTTP caller the application passes this on to.
    throw_key_error(sqlstate::key_invalid, "the Idempotency-Key is required", *name,
                    "Send the request again with an Idempotency-Key header, such as a UUID.",
                    "key is NULL");
  *key = PG_GETARG_TEXT_PP(1);
  name->key = printable(*key);
  int key_chars = char_length(*key);
  if (key_chars == 0)
    throw_key_error(sqlstate::key_invalid, "the Idempotency-Key must not be empty", *name,
                    "Send the request again with an Idempotency-Key header, such as a UUID.");
  if (key_chars > max_key_chars)
    throw_key_error(sqlstate::key_invalid, "the Idempotency-Key is longer than 255 characters",
                    *name, "Use a key of 1 to 255 characters, such as a UUID.");
}

text *require_text(FunctionCallInfo fcinfo, int argno, const char *sqlstate, const char *what,
                   const KeyName &name) {
  if (PG_ARGISNULL(argno) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(argno)) == 0) {
    const char *message = psprintf("%s must not be %s", what,
                                   PG_ARGISNULL(argno) ? "NULL" : "empty");
    throw_key_error(sqlstate, message, name, psprintf("Pass a non-empty %s.", what));
  }
  return PG_GETARG_TEXT_PP(argno);
}

int64 require_fence(FunctionCallInfo fcinfo, int argno, const KeyName &name) {
  if (PG_ARGISNULL(argno))
    throw_key_error(sqlstate::bad_argument, "fence must not be NULL", name,
                    "Pass the fence returned by the claim that made you the owner.");
  int64 fence = PG_GETARG_INT64(argno);
  if (fence <= 0)
    throw_key_error(sqlstate::bad_argument, psprintf("fence must be positive, not %lld",
                                                     static_cast<long long>(fence)),
                    name, "Pass the fence returned by the claim that made you the owner.");
  return fence;
}

bool require_bool(FunctionCallInfo fcinfo, int argno, const char *what, const KeyName &name) {
  if (PG_ARGISNULL(argno))
    throw_key_error(sqlstate::bad_argument, psprintf("%s must not be NULL", what), name,
                    psprintf("Pass true or false for %s.", what));
  return PG_GETARG_BOOL(argno);
}

int32 require_batch_limit(FunctionCallInfo fcinfo, int argno) {
  KeyName none = {nullptr, nullptr};
  if (PG_ARGISNULL(argno))
    throw_key_error(sqlstate::bad_argument, "batch_limit must not be NULL", none,
                    "Pass a positive number of rows, such as 10000.", "batch_limit is NULL");
  int32 limit = PG_GETARG_INT32(argno);
  if (limit <= 0)
    throw_key_error(sqlstate::bad_argument,
                    psprintf("batch_limit must be positive, not %d", limit), none,
                    "Pass a positive number of rows, such as 10000.",
                    psprintf("batch_limit is %d", limit));
  return limit;
}

bool optional_response_code(FunctionCallInfo fcinfo, int argno, bool required,
                            const KeyName &name, int32 *code) {
  if (PG_ARGISNULL(argno)) {
    if (required)
      throw_key_error(sqlstate::bad_argument, "response_code must not be NULL", name,
                      "Pass the HTTP status the request answered, such as 201.");
    return false;
  }
  *code = PG_GETARG_INT32(argno);
  if (*code < 100 || *code > 599)
    throw_key_error(sqlstate::bad_argument,
                    psprintf("response_code %d is not an HTTP status code", *code), name,
                    "Pass an HTTP status between 100 and 599.");
  return true;
}

bool interval_is_acceptable(const Interval *value, bool or_zero) {
  if (!compat::interval_is_finite(value)) return false;
  return or_zero ? interval_rule::is_not_negative(value->month, value->day, value->time)
                 : interval_rule::is_positive(value->month, value->day, value->time);
}

Datum interval_is_positive_sql(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  bool or_zero = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
  PG_RETURN_BOOL(interval_is_acceptable(PG_GETARG_INTERVAL_P(0), or_zero));
}

const Interval *require_finite_interval(FunctionCallInfo fcinfo, int argno, const char *what,
                                        const KeyName &name) {
  const Interval *given = PG_GETARG_INTERVAL_P(argno);
  if (!compat::interval_is_finite(given))
    throw_key_error(sqlstate::bad_argument, psprintf("%s must be a finite interval", what), name,
                    psprintf("Pass a positive %s such as '30 seconds', or NULL for the setting "
                             "idem.%s%s.", what, what,
                             strcmp(what, "retention") == 0
                                 ? " (idem.retention = -1 keeps keys forever)" : ""));
  return given;
}

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
  const Interval *given = require_finite_interval(fcinfo, argno, what, name);
  bool positive = interval_is_acceptable(given, false);
  if (!positive)
    throw_key_error(sqlstate::bad_argument, psprintf("%s must be a positive interval", what),
                    name, psprintf("Pass a positive %s such as '30 seconds', or NULL for the "
                                   "setting idem.%s.", what, what));
  *out = *given;
  return true;
}

TimestampTz require_positive_interval(FunctionCallInfo fcinfo, int argno, const char *what,
                                      TimestampTz now, const KeyName &name, const char *hint) {
  if (PG_ARGISNULL(argno))
    throw_key_error(sqlstate::bad_argument, psprintf("%s must not be NULL", what), name, hint);
  const Interval *given = require_finite_interval(fcinfo, argno, what, name);
  if (!interval_is_acceptable(given, false))
    throw_key_error(sqlstate::bad_argument, psprintf("%s must be a positive interval", what), name,
                    hint);
  TimestampTz end = DatumGetTimestampTz(DirectFunctionCall2(
      timestamptz_pl_interval, TimestampTzGetDatum(now), IntervalPGetDatum(given)));
  if (end <= now)
    throw_key_error(sqlstate::bad_argument, psprintf("%s must be a positive interval", what), name,
                    hint);
  return end;
}

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(interval_is_positive, idem::interval_is_positive_sql)

}  // extern "C"
