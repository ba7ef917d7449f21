// The operator's by-key tools: idem.lookup, idem.evict, idem.force_expire,
// each use written to the server log with who asked. Evict and force_expire
// refuse an in-flight key unless forced (P4021) and a missing one (P4020);
// lookup answers a missing key with no row.
#include "base/arguments.hpp"
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "pg/message_text.hpp"
#include "pg/spi_session.hpp"

namespace idem {

namespace {

// Columns of the tools' result rows (lookup_key, evict_key and force_expire_key,
// src/pure/key_statements.def).
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
                       application_name != nullptr ? application_name : "",
                       message_text::excerpt(name.scope), message_text::excerpt(name.key),
                       what)));
}

// What the log and the errors report about a row: its status and fence,
// copied out of row 0 of the session's last result, so it outlives it.
struct RowSummary {
  const char *status;
  const char *text;  // "status ..., fence ..."
};
IDEM_LONGJMP_SAFE(RowSummary);

RowSummary summarize_row(const SpiSession *session, int status_column, int fence_column) {
  bool isnull;
  int64 fence = spi_int64(session, 0, fence_column, &isnull);
  const char *status = spi_copy_text(session, 0, status_column);
  // While connected, the current context is SPI's own: format in the caller's.
  MemoryContext spi_context = MemoryContextSwitchTo(session->caller_context);
  const char *text = psprintf("status %s, fence %lld", status, static_cast<long long>(fence));
  MemoryContextSwitchTo(spi_context);
  return RowSummary{status, text};
}

// The tool's statement matched no row: the key is missing, or in flight and
// force was not given. Logs the refusal, then raises it.
[[noreturn]] void refuse(SpiSession *session, const char *tool, const KeyName &name,
                         Datum *params) {
  uint64 rows = spi_run(session, Statement::key_fence_and_status, params, nullptr);
  RowSummary observed = {nullptr, nullptr};
  if (rows != 0) observed = summarize_row(session, key_status_column, key_fence_column);
  spi_finish(session);
  if (rows == 0) {
    log_tool_use(tool, name, "refused: no such key");
    ereport(ERROR, (errcode_of(sqlstate::key_not_found),
                    errmsg("idem.%s: idempotency key does not exist", tool), errdetail_key(name),
                    errhint("Check the scope and key with idem.lookup; an expired key may "
                            "already have been purged.")));
  }
  if (strcmp(observed.status, "processing") != 0) {
    // The row changed between the tool's statement and this look.
    log_tool_use(tool, name,
                 psprintf("refused: the key changed meanwhile (%s)", observed.text));
    ereport(ERROR, (errcode_of(sqlstate::contention),
                    errmsg("idem.%s: the idempotency key changed while being handled", tool),
                    errdetail_key(name, observed.text), errhint("Run the call again.")));
  }
  log_tool_use(tool, name, psprintf("refused: the key is in flight (%s)", observed.text));
  ereport(ERROR, (errcode_of(sqlstate::key_in_flight),
                  errmsg("idem.%s: idempotency key is being processed", tool),
                  errdetail_key(name, observed.text),
                  errhint("Its owner may still be working and would lose its outcome. Wait for "
                          "it (idem.lookup shows locked_until), or pass force => true to end it "
                          "anyway.")));
}

// Runs evict; returns the row as it was.
Datum run_tool(FunctionCallInfo fcinfo, const char *tool, Statement statement,
               const char *done) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  bool force = require_bool(fcinfo, 2, "force", name);
  Datum params[4] = {PointerGetDatum(scope), PointerGetDatum(key), BoolGetDatum(force),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
  SpiSession session;
  spi_connect(&session);
  if (spi_run(&session, statement, params, nullptr) == 0) refuse(&session, tool, name, params);
  RowSummary changed = summarize_row(&session, tool_status, tool_fence);
  bool isnull;
  Datum result = spi_copy_datum(&session, 0, tool_row, &isnull);
  spi_finish(&session);
  log_tool_use(tool, name, psprintf("%s (%s%s)", done, changed.text, force ? ", forced" : ""));
  return result;
}

Datum lookup_key(FunctionCallInfo fcinfo) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  InitMaterializedSRF(fcinfo, 0);
  auto *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  Datum params[2] = {PointerGetDatum(scope), PointerGetDatum(key)};
  SpiSession session;
  spi_connect(&session);
  uint64 rows = spi_run(&session, Statement::lookup_key, params, nullptr);
  bool isnull = true;
  Datum whole_row = Datum(0);
  RowSummary found = {nullptr, nullptr};
  if (rows != 0) {
    whole_row = spi_copy_datum(&session, 0, tool_row, &isnull);
    found = summarize_row(&session, tool_status, tool_fence);
  }
  spi_finish(&session);
  if (rows == 0) {
    log_tool_use("lookup", name, "no such key");
    return (Datum)0;
  }
  HeapTupleData row = heap_tuple_of(DatumGetHeapTupleHeader(whole_row));
  tuplestore_puttuple(result->setResult, &row);  // copies into the result's memory
  log_tool_use("lookup", name, psprintf("found (%s)", found.text));
  return (Datum)0;
}

Datum evict_key(FunctionCallInfo fcinfo) {
  return run_tool(fcinfo, "evict", Statement::evict_key, "deleted");
}

// force_expire: the key's created_at read first (key_created_at, the
// statement says why), then the write for that created_at; a key created
// again in between is read again. A key that is not there still goes
// through the write, which matches nothing: a read-only transaction then
// refuses it (25006) as it refuses the write of a key that is there, and
// the portable engine's force_expire answers the same.
constexpr int force_expire_reads = 3;

Datum force_expire_key(FunctionCallInfo fcinfo) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  bool force = require_bool(fcinfo, 2, "force", name);
  Datum params[6] = {PointerGetDatum(scope), PointerGetDatum(key), BoolGetDatum(force),
                     TimestampTzGetDatum(GetCurrentTimestamp()), Datum(0), Datum(0)};
  SpiSession session;
  spi_connect(&session);
  uint64 rows = 0;
  for (int read = 0; read < force_expire_reads && rows == 0; ++read) {
    TimestampTz created_at = GetCurrentTimestamp();
    bool found = spi_run(&session, Statement::key_created_at, params, nullptr) != 0;
    if (found) {
      bool isnull;
      created_at = DatumGetTimestampTz(spi_copy_datum(&session, 0, 1, &isnull));
    }
    params[4] = TimestampTzGetDatum(created_at + 1);  // one microsecond later
    params[5] = TimestampTzGetDatum(created_at);
    rows = spi_run(&session, Statement::force_expire_key, params, nullptr);
    if (!found) break;
  }
  if (rows == 0) refuse(&session, "force_expire", name, params);
  RowSummary changed = summarize_row(&session, tool_status, tool_fence);
  bool isnull;
  Datum result = spi_copy_datum(&session, 0, tool_row, &isnull);
  spi_finish(&session);
  log_tool_use("force_expire", name,
               psprintf("expired (%s%s)", changed.text, force ? ", forced" : ""));
  return result;
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(lookup, idem::lookup_key)
IDEM_SQL_FUNCTION(evict, idem::evict_key)
IDEM_SQL_FUNCTION(force_expire, idem::force_expire_key)

}  // extern "C"
