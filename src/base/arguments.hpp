// Checks of the SQL functions' arguments. Each failure is an ereport(ERROR)
// with the documented SQLSTATE, a message a person understands, a detail that
// names the scope and key (errdetail_key), and a hint.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The (scope, key) an error is about; either may be null. The caller's texts,
// quoted (message_text::excerpt) only when a message is made: a call that
// raises nothing never copies them.
struct KeyName {
  const text *scope;
  const text *key;
};
IDEM_LONGJMP_SAFE(KeyName);

// Fetches scope and key (arguments 0 and 1) and checks them (P4000, P4001).
// The returned texts are detoasted; name points at them, for messages.
void require_scope_and_key(FunctionCallInfo fcinfo, text **scope, text **key, KeyName *name);

// A required non-empty text argument (request hash, failure code, recovery point).
text *require_text(FunctionCallInfo fcinfo, int argno, const char *sqlstate,
                   const char *what, const KeyName &name);

int64 require_fence(FunctionCallInfo fcinfo, int argno, const KeyName &name);
bool require_bool(FunctionCallInfo fcinfo, int argno, const char *what, const KeyName &name);
int32 require_batch_limit(FunctionCallInfo fcinfo, int argno);

// An HTTP status code, or NULL when allowed.
bool optional_response_code(FunctionCallInfo fcinfo, int argno, bool required,
                            const KeyName &name, int32 *code);

// The one rule for intervals (interval_rule.hpp): finite, and positive from
// every moment (with or_zero, not negative). Every interval argument and
// idem.scope_policy's interval columns are judged by it; SQL reaches it as
// idem.interval_is_positive.
bool interval_is_acceptable(const Interval *value, bool or_zero);

// An interval argument accepted by interval_is_acceptable, or the setting's value when
// NULL. Returns false (and leaves *out alone) when the result means "no
// interval", which only idem.retention = -1 can mean.
bool interval_or_setting(FunctionCallInfo fcinfo, int argno, const char *what,
                         int setting_value, int64 setting_unit_usecs, TimestampTz now,
                         const KeyName &name, Interval *out);

// A required interval argument accepted by interval_is_acceptable (max_wait,
// extend_by): returns now + the interval. NULL, 'infinity' and an interval
// that is not positive (or, in a time zone with a daylight-saving change of
// more than an hour, does not end after now) are refused with P4004 and the
// given hint.
TimestampTz require_positive_interval(FunctionCallInfo fcinfo, int argno, const char *what,
                                      TimestampTz now, const KeyName &name, const char *hint);

// The errdetail of an error about a key, used inside ereport() as errdetail
// is: 'scope "s", key "k"' for the names given, then suffix (when not null)
// after "; ". Adds nothing when there is nothing to say.
int errdetail_key(const KeyName &name, const char *suffix = nullptr);

}  // namespace idem
