// The Postgres side of the key table's invariants: reads the columns the
// CHECK constraint passes into a RequestRow and lets row_invariants.cpp
// judge it. Called once per row written, so it reads only what the rules
// need: lengths, NULL flags, and the status label. Each function returns
// true when every invariant holds, otherwise raises 23514 naming the first
// rule the row breaks.
#include <string>

#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "keys/row_check.hpp"
#include "pure/row_invariants.hpp"

namespace idem {

namespace {

// The arguments, in the order of the table's columns (sql/idem--1.0--1.1.sql).
enum InvariantArg {
  arg_scope,
  arg_key,
  arg_request_hash,
  arg_status,
  arg_recovery_point,
  arg_fence,
  arg_attempt_count,
  arg_locked_until,
  arg_response_code,
  arg_response_body,
  arg_failure_code,
  arg_failure_message,
  arg_created_at,
  arg_finished_at,
  arg_expires_at,
};

std::optional<std::string_view> text_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return std::nullopt;
  text *value = PG_GETARG_TEXT_PP(argno);
  return std::string_view(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

// char_length(), in the server's encoding.
std::optional<std::size_t> char_length_arg(FunctionCallInfo fcinfo, int argno) {
  std::optional<std::string_view> value = text_arg(fcinfo, argno);
  if (!value) return std::nullopt;
  return static_cast<std::size_t>(
      pg_mbstrlen_with_len(value->data(), static_cast<int>(value->size())));
}

std::optional<Status> status_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return std::nullopt;
  const char *label = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(argno)));
  Status status;
  // Only a label added to idem.idempotency_status by hand gets here.
  if (!parse_status(label, &status)) {
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("unknown idempotency status \"%s\"", label),
                    errdetail("The invariants know the statuses processing, succeeded, "
                              "failed_retryable and failed_final."),
                    errhint("idem.idempotency_status must keep the labels of its release.")));
  }
  return status;
}

std::optional<std::int32_t> int32_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return std::nullopt;
  return PG_GETARG_INT32(argno);
}

std::optional<std::int64_t> int64_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return std::nullopt;
  return PG_GETARG_INT64(argno);
}

std::optional<std::int64_t> timestamptz_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return std::nullopt;
  return PG_GETARG_TIMESTAMPTZ(argno);
}

// The key table's columns those arguments come from (row_check.hpp).
const char *const invariant_columns[] = {
    "scope",          "key",           "request_hash", "status",          "recovery_point",
    "fence",          "attempt_count", "locked_until", "response_code",   "response_body",
    "failure_code",   "failure_message", "created_at", "finished_at",     "expires_at"};
static_assert(sizeof invariant_columns / sizeof invariant_columns[0] == arg_expires_at + 1,
              "one column per argument");
RowColumns invariant_row_columns = {invariant_columns, arg_expires_at + 1, InvalidOid, 0, {}};

// The rules over the columns passed one by one (InvariantArg).
Datum request_invariants_hold(FunctionCallInfo fcinfo) {
  RequestRow row;
  row.scope_chars = char_length_arg(fcinfo, arg_scope);
  row.key_chars = char_length_arg(fcinfo, arg_key);
  std::optional<std::string_view> request_hash = text_arg(fcinfo, arg_request_hash);
  if (request_hash) row.request_hash_bytes = request_hash->size();
  row.status = status_arg(fcinfo, arg_status);
  row.recovery_point = text_arg(fcinfo, arg_recovery_point);
  row.fence = int64_arg(fcinfo, arg_fence);
  row.attempt_count = int32_arg(fcinfo, arg_attempt_count);
  row.has_locked_until = !PG_ARGISNULL(arg_locked_until);
  row.response_code = int32_arg(fcinfo, arg_response_code);
  row.has_response_body = !PG_ARGISNULL(arg_response_body);
  row.failure_code = text_arg(fcinfo, arg_failure_code);
  row.has_failure_message = !PG_ARGISNULL(arg_failure_message);
  row.created_at = timestamptz_arg(fcinfo, arg_created_at);
  row.has_finished_at = !PG_ARGISNULL(arg_finished_at);
  row.expires_at = timestamptz_arg(fcinfo, arg_expires_at);
  require_invariants(row);
  PG_RETURN_BOOL(true);
}

// idem.request_invariants_hold(idem.idempotency_request): the same rules over
// the whole row, what the key table's one CHECK constraint calls (row_check.hpp).
Datum request_row_invariants_hold(FunctionCallInfo fcinfo) {
  return call_with_row_columns(fcinfo, &invariant_row_columns, request_invariants_hold);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(request_invariants_hold, idem::request_invariants_hold)
IDEM_SQL_FUNCTION(request_row_invariants_hold, idem::request_row_invariants_hold)

}  // extern "C"
