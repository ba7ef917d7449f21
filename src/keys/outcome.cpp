// Writes by the key's owner: mark_succeeded, mark_failed, set_recovery_point,
// extend_lock. Each is one fenced UPDATE; only when it matches no row do we
// look at the row again, to tell the caller why (missing, stale fence, or not
// owned).
//
// mark_succeeded_returning and mark_failed_returning: the owner's outcome,
// then the key's answer as every replay will carry it (idem.stored_answer).
// C functions, not SQL ones, so that `(f(...)).*` marks once per row
// (statement_memo.hpp): as SQL, each column would call the function again, and
// every call after the first would find the key finished (P4010, P4011).
#include "base/arguments.hpp"
#include "keys/owner_refusal.hpp"
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "policy/scope_owner.hpp"
#include "waits/request_durations.hpp"
#include "pg/spi_session.hpp"
#include "keys/statement_memo.hpp"
#include "base/stats.hpp"
#include "waits/wait_slots.hpp"

namespace idem {

namespace {

// Shared parameters of the owner's writes; the outcome follows them.
enum OwnerParam { owner_scope, owner_key, owner_fence, owner_now, owner_first_value };
constexpr int max_owner_params = 9;

struct OwnerWrite {
  Datum params[max_owner_params];
  char nulls[max_owner_params];
  KeyName name;
  int64 fence;
};
IDEM_LONGJMP_SAFE(OwnerWrite);

void begin_owner_write(FunctionCallInfo fcinfo, OwnerWrite *write) {
  text *scope;
  text *key;
  require_scope_and_key(fcinfo, &scope, &key, &write->name);
  write->fence = require_fence(fcinfo, 2, write->name);
  for (int i = 0; i < max_owner_params; ++i) write->nulls[i] = ' ';
  write->params[owner_scope] = PointerGetDatum(scope);
  write->params[owner_key] = PointerGetDatum(key);
  write->params[owner_fence] = Int64GetDatum(write->fence);
  write->params[owner_now] = TimestampTzGetDatum(GetCurrentTimestamp());
}

// Copies argument argno (or its NULL) into parameter slot.
void pass_argument(FunctionCallInfo fcinfo, int argno, OwnerWrite *write, int slot) {
  write->params[slot] = PG_ARGISNULL(argno) ? Datum(0) : PG_GETARG_DATUM(argno);
  write->nulls[slot] = PG_ARGISNULL(argno) ? 'n' : ' ';
}

// mark_succeeded and mark_failed return the claimed_at of the row they completed.
void record_duration(const SpiSession *session, const OwnerWrite &write) {
  bool isnull;
  Datum claimed_at = spi_copy_datum(session, 0, 1, &isnull);
  if (!isnull)
    request_durations::record(DatumGetTextPP(write.params[owner_scope]),
                              DatumGetTimestampTz(claimed_at),
                              DatumGetTimestampTz(write.params[owner_now]));
}

// done: the counter of a write that found its row. An outcome (not a
// recovery point) wakes the key's waiters when the transaction commits.
Datum run_owner_write(Statement statement, OwnerWrite *write, const char *not_owned_sqlstate,
                      const char *operation, stats::Counter done) {
  require_scope_owner(DatumGetTextPP(write->params[owner_scope]));
  SpiSession session;
  spi_connect(&session);
  if (spi_run(&session, statement, write->params, write->nulls) == 0)
    explain_refusal(&session, write->name, write->fence, write->params, write->nulls,
                    not_owned_sqlstate, operation);
  // An outcome ends the request: how long it took feeds idem.retry_after.
  if (statement != Statement::set_recovery_point) record_duration(&session, *write);
  spi_finish(&session);
  stats::count(done);
  if (statement != Statement::set_recovery_point)
    wait_slots::wake_at_commit(
        wait_slots::stripe_of(DatumGetTextPP(write->params[owner_scope]),
                              DatumGetTextPP(write->params[owner_key])));
  return (Datum)0;
}

Datum mark_succeeded(FunctionCallInfo fcinfo) {
  OwnerWrite write;
  begin_owner_write(fcinfo, &write);
  int32 response_code;
  optional_response_code(fcinfo, 3, true, write.name, &response_code);
  write.params[owner_first_value] = Int32GetDatum(response_code);
  pass_argument(fcinfo, 4, &write, owner_first_value + 1);  // response_body
  pass_argument(fcinfo, 5, &write, owner_first_value + 2);  // result_ref_type
  pass_argument(fcinfo, 6, &write, owner_first_value + 3);  // result_ref_id
  return run_owner_write(Statement::mark_succeeded, &write, sqlstate::succeed_not_owned,
                         "mark_succeeded", stats::Counter::marked_succeeded);
}

// 'abandoned' is the one failure code the statements act on (the sweeper's
// marker: the owner may still finish, extend_lock revives it, a claim or the
// completer takes it over), so an owner writing it would forge that fact.
// idem's other codes ('expired', 'too_many_attempts') are only reported,
// never read back, and 1.0 accepted them from applications ("card
// expired"), so they stay an application's to use.
void refuse_reserved_failure_code(const text *code, const KeyName &name) {
  static const char *const reserved[] = {"abandoned"};
  size_t length = VARSIZE_ANY_EXHDR(code);
  for (const char *marker : reserved) {
    if (length != strlen(marker) || memcmp(VARDATA_ANY(code), marker, length) != 0) continue;
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("failure_code '%s' is reserved for idem's own markers", marker),
                    errdetail_key(name),
                    errhint("idem's sweeper records 'abandoned' itself; pass a code of your own, "
                            "such as 'app_timeout'.")));
  }
}

Datum mark_failed(FunctionCallInfo fcinfo) {
  OwnerWrite write;
  begin_owner_write(fcinfo, &write);
  bool retryable = require_bool(fcinfo, 3, "retryable", write.name);
  refuse_reserved_failure_code(
      require_text(fcinfo, 4, sqlstate::bad_argument, "failure_code", write.name), write.name);
  int32 response_code;
  bool has_response_code = optional_response_code(fcinfo, 6, false, write.name, &response_code);
  write.params[owner_first_value] = BoolGetDatum(retryable);
  pass_argument(fcinfo, 4, &write, owner_first_value + 1);  // failure_code
  pass_argument(fcinfo, 5, &write, owner_first_value + 2);  // failure_message
  pass_argument(fcinfo, 6, &write, owner_first_value + 3);  // response_code
  if (has_response_code) write.params[owner_first_value + 3] = Int32GetDatum(response_code);
  pass_argument(fcinfo, 7, &write, owner_first_value + 4);  // response_body
  return run_owner_write(Statement::mark_failed, &write, sqlstate::fail_not_owned,
                         "mark_failed",
                         retryable ? stats::Counter::marked_failed_retryable
                                   : stats::Counter::marked_failed_final);
}

Datum set_recovery_point(FunctionCallInfo fcinfo) {
  OwnerWrite write;
  begin_owner_write(fcinfo, &write);
  text *recovery_point = require_text(fcinfo, 3, sqlstate::bad_argument, "recovery_point",
                                      write.name);
  const char *finished = "finished";
  if (VARSIZE_ANY_EXHDR(recovery_point) == strlen(finished) &&
      memcmp(VARDATA_ANY(recovery_point), finished, strlen(finished)) == 0)
    ereport(ERROR,
            (errcode_of(sqlstate::bad_argument),
             errmsg("recovery point 'finished' can only be reached through mark_succeeded"),
             errdetail_key(write.name),
             errhint("Call idem.mark_succeeded to finish the request.")));
  write.params[owner_first_value] = PointerGetDatum(recovery_point);
  return run_owner_write(Statement::set_recovery_point, &write, sqlstate::checkpoint_not_owned,
                         "set_recovery_point", stats::Counter::recovery_points_set);
}

Datum extend_lock(FunctionCallInfo fcinfo) {
  OwnerWrite write;
  begin_owner_write(fcinfo, &write);
  TimestampTz now = DatumGetTimestampTz(write.params[owner_now]);
  require_positive_interval(fcinfo, 3, "extend_by", now, write.name,
                            "Pass how much longer the lock must hold from now, such as "
                            "'5 minutes'; extend_lock never shortens a lock.");
  write.params[owner_first_value] = PG_GETARG_DATUM(3);
  require_scope_owner(DatumGetTextPP(write.params[owner_scope]));
  SpiSession session;
  spi_connect(&session);
  if (spi_run(&session, Statement::extend_lock, write.params, write.nulls) == 0)
    explain_refusal(&session, write.name, write.fence, write.params, write.nulls,
                    sqlstate::lock_not_owned, "extend_lock");
  bool isnull = true;
  Datum locked_until = spi_copy_datum(&session, 0, 1, &isnull);
  spi_finish(&session);
  return locked_until;
}

// The stored answer of the key just completed (arguments 0 and 1, checked by
// the mark); read after the mark's write, in a session of its own.
Datum stored_answer(FunctionCallInfo fcinfo) {
  Datum params[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
  SpiSession session;
  spi_connect(&session);
  uint64 rows = spi_run(&session, Statement::stored_answer, params, nullptr);
  bool isnull = true;
  Datum answer = rows == 1 ? spi_copy_datum(&session, 0, 1, &isnull) : Datum(0);
  spi_finish(&session);
  // The mark found the row in this transaction: it is still there.
  if (isnull)
    ereport(ERROR, (errcode_of(sqlstate::internal),
                    errmsg("idem: a key just completed has no stored answer"),
                    errhint("This is a bug in idem; please report it.")));
  return answer;
}

Datum mark_succeeded_returning(FunctionCallInfo fcinfo) {
  (void)mark_succeeded(fcinfo);
  return stored_answer(fcinfo);
}

Datum mark_failed_returning(FunctionCallInfo fcinfo) {
  (void)mark_failed(fcinfo);
  return stored_answer(fcinfo);
}

}  // namespace

void explain_refusal(SpiSession *session, const KeyName &name, int64 fence, Datum *params,
                     const char *nulls, const char *not_owned_sqlstate, const char *operation) {
  uint64 rows = spi_run(session, Statement::key_fence_and_status, params, nulls);
  bool isnull = true;
  int64 current_fence = 0;
  const char *status = nullptr;
  if (rows != 0) {
    current_fence = spi_int64(session, 0, key_fence_column, &isnull);
    status = spi_copy_text(session, 0, key_status_column);  // survives spi_finish
  }
  spi_finish(session);
  if (rows == 0)
    ereport(ERROR, (errcode_of(not_owned_sqlstate),
                    errmsg("%s: idempotency key does not exist", operation),
                    errdetail_key(name),
                    errhint("Claim the key with idem.claim_idempotency_key first; it may have "
                            "expired and been purged.")));
  if (current_fence > fence) {
    stats::count(stats::Counter::stale_fences);
    ereport(ERROR, (errcode_of(sqlstate::stale_fence),
                    errmsg("%s: stale fence, a newer claim owns the idempotency key", operation),
                    errdetail_key(name, psprintf("your fence %lld is older than the key's",
                                                 static_cast<long long>(fence))),
                    errhint("Your lock expired and another request took the key over; stop "
                            "working on it and do not record an outcome.")));
  }
  ereport(ERROR, (errcode_of(not_owned_sqlstate),
                  errmsg("%s: idempotency key is not owned by this fence", operation),
                  errdetail_key(name, psprintf("status %s, your fence %lld", status,
                                               static_cast<long long>(fence))),
                  errhint("Only the owner of a processing key (or of one swept as abandoned) "
                          "may write it; claim the key first.")));
}

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(mark_succeeded, idem::mark_succeeded)
IDEM_SQL_FUNCTION(mark_failed, idem::mark_failed)
IDEM_SQL_FUNCTION(set_recovery_point, idem::set_recovery_point)
IDEM_SQL_FUNCTION(extend_lock, idem::extend_lock)
IDEM_SQL_FUNCTION_PER_ROW(mark_succeeded_returning, idem::mark_succeeded_returning)
IDEM_SQL_FUNCTION_PER_ROW(mark_failed_returning, idem::mark_failed_returning)

}  // extern "C"
