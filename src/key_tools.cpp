// idem.lookup, idem.evict and idem.force_expire (see key_tools.hpp). Evict and
// force_expire refuse an in-flight key unless forced (P4021) and a missing one
// (P4020); lookup answers a missing key with no row.
#include "key_tools.hpp"

#include "arguments.hpp"
#include "errors.hpp"
#include "statements.hpp"

namespace idem {

namespace {

// Columns of the tools' result rows (statements.cpp).
enum ToolColumn { tool_row = 1, tool_status, tool_fence };

const char *role_name(Oid role) {
  const char *name = GetUserNameFromId(role, true);
  return name != nullptr ? name : "(dropped role)";
}

// One LOG line per use: who (the login role; the role in effect where the
// call was made, which SECURITY DEFINER does not hide; application_name),
// which tool, which key, what happened. The client's address is
// log_line_prefix's %h (libpq-be.h would drag in GSSAPI headers).
void log_tool_use(const char *tool, const KeyName &name, const char *what) {
  ereport(LOG, (errmsg("idem.%s by session user \"%s\", role \"%s\", application \"%s\": "
                       "scope \"%s\", key \"%s\": %s",
                       tool, role_name(GetSessionUserId()), role_name(GetOuterUserId()),
                       application_name != nullptr ? application_name : "", name.scope,
                       name.key, what)));
}

const char *status_and_fence(int status_column, int fence_column) {
  bool isnull;
  int64 fence = DatumGetInt64(
      SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, fence_column, &isnull));
  const char *status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, status_column);
  return psprintf("status %s, fence %lld", status, static_cast<long long>(fence));
}

// The tool's statement matched no row: the key is missing, or in flight and
// force was not given. Logs the refusal, then raises it.
[[noreturn]] void refuse(const char *tool, const KeyName &name, Datum *params) {
  uint64 rows = execute_statement(Statement::owner_fence, params, nullptr);
  if (rows == 0) {
    SPI_finish();
    log_tool_use(tool, name, "refused: no such key");
    throw_key_error(sqlstate::key_not_found,
                    psprintf("idem.%s: idempotency key does not exist", tool), name,
                    "Check the scope and key with idem.lookup; an expired key may already "
                    "have been purged.");
  }
  const char *status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
  const char *observed = status_and_fence(2, 1);
  SPI_finish();
  if (strcmp(status, "processing") != 0) {
    // The row changed between the tool's statement and this look.
    log_tool_use(tool, name, psprintf("refused: the key changed meanwhile (%s)", observed));
    throw_key_error(sqlstate::contention,
                    psprintf("idem.%s: the idempotency key changed while being handled", tool),
                    name, "Run the call again.", observed);
  }
  log_tool_use(tool, name, psprintf("refused: the key is in flight (%s)", observed));
  throw_key_error(sqlstate::key_in_flight,
                  psprintf("idem.%s: idempotency key is being processed", tool), name,
                  "Its owner may still be working and would lose its outcome. Wait for it "
                  "(idem.lookup shows locked_until), or pass force => true to end it anyway.",
                  observed);
}

// Runs evict or force_expire; returns the row as it now is (or was, evicted).
Datum run_tool(FunctionCallInfo fcinfo, const char *tool, Statement statement,
               const char *done) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  bool force = require_bool(fcinfo, 2, "force", name);
  Datum params[4] = {PointerGetDatum(scope), PointerGetDatum(key), BoolGetDatum(force),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
  if (SPI_connect() != SPI_OK_CONNECT) throw Error(sqlstate::internal, "SPI_connect failed");
  if (execute_statement(statement, params, nullptr) == 0) refuse(tool, name, params);
  log_tool_use(tool, name,
               psprintf("%s (%s%s)", done, status_and_fence(tool_status, tool_fence),
                        force ? ", forced" : ""));
  bool isnull;
  Datum row = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, tool_row, &isnull);
  Datum result = SPI_datumTransfer(row, false, -1);  // into the caller's memory
  SPI_finish();
  return result;
}

}  // namespace

Datum lookup_key(FunctionCallInfo fcinfo) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  InitMaterializedSRF(fcinfo, 0);
  auto *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  Datum params[2] = {PointerGetDatum(scope), PointerGetDatum(key)};
  if (SPI_connect() != SPI_OK_CONNECT) throw Error(sqlstate::internal, "SPI_connect failed");
  if (execute_statement(Statement::lookup_key, params, nullptr) == 0) {
    SPI_finish();
    log_tool_use("lookup", name, "no such key");
    return (Datum)0;
  }
  bool isnull;
  HeapTupleHeader header = DatumGetHeapTupleHeader(
      SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, tool_row, &isnull));
  HeapTupleData row;
  row.t_len = HeapTupleHeaderGetDatumLength(header);
  ItemPointerSetInvalid(&row.t_self);
  row.t_tableOid = InvalidOid;
  row.t_data = header;
  tuplestore_puttuple(result->setResult, &row);  // copies into the result's memory
  const char *found = psprintf("found (%s)", status_and_fence(tool_status, tool_fence));
  SPI_finish();
  log_tool_use("lookup", name, found);
  return (Datum)0;
}

Datum evict_key(FunctionCallInfo fcinfo) {
  return run_tool(fcinfo, "evict", Statement::evict_key, "deleted");
}

Datum force_expire_key(FunctionCallInfo fcinfo) {
  return run_tool(fcinfo, "force_expire", Statement::force_expire_key, "expired");
}

}  // namespace idem
