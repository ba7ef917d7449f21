// The completers of one idem.run_maintenance call (completer_call.hpp). The
// statements are the worker's (policy_statements.cpp); what differs is where
// the completer runs: here, in the caller's backend, as its owner, in a
// subtransaction, instead of in a process connected as its owner.
//
// Error handling: the claim and the checks raise as any statement would (the
// call fails, as the worker's round does). The completer itself runs under
// PG_TRY inside its subtransaction: its error is copied, the subtransaction
// rolled back (which also restores the user, the security context and the
// settings), and the error logged as a WARNING with scope and key.
#include "policy/completer_call.hpp"

#include "pg/catalog_cache.hpp"
#include "policy/completer_launch.hpp"
#include "policy/scope_owner.hpp"
#include "keys/stats.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "utils/regproc.h"
#include "utils/resowner.h"
}

namespace idem {

namespace {

constexpr int candidate_columns = 4;

// What the call's claim of a key granted.
struct CallOwnership {
  bool owned;
  int64 fence;
  int32 attempt_count;
  Datum recovery_point;
  bool recovery_point_null;
};
IDEM_LONGJMP_SAFE(CallOwnership);

uint64 exhaust_attempts(SpiSession *session, int32 limit, int max_batches, bool *more) {
  uint64 total = 0;
  for (int batch = 0; batch < max_batches; ++batch) {
    Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
    uint64 rows = spi_run(session, Statement::exhaust_attempts, params, nullptr);
    total += rows;
    if (rows < static_cast<uint64>(limit)) return total;
  }
  *more = true;
  return total;
}

int load_candidates(SpiSession *session, int32 limit, Candidate **out) {
  Datum params[2] = {TimestampTzGetDatum(GetCurrentTimestamp()), Int32GetDatum(limit)};
  uint64 rows = spi_run(session, Statement::completer_candidates, params, nullptr);
  Candidate *candidates = static_cast<Candidate *>(palloc0(sizeof(Candidate) * (rows + 1)));
  for (uint64 row = 0; row < rows; ++row) {
    Datum values[candidate_columns];
    bool nulls[candidate_columns];
    spi_copy_row(session, row, candidate_columns, values, nulls);
    candidates[row] = Candidate{values[0], values[1], values[2],
                                nulls[3] ? InvalidOid : DatumGetObjectId(values[3])};
  }
  *out = candidates;
  return static_cast<int>(rows);
}

// The claim a client's retry would make (completer_claim): exactly one of
// this call and a late retry owns the key.
CallOwnership claim(SpiSession *session, const Candidate &candidate) {
  CallOwnership ownership = {false, 0, 0, Datum(0), true};
  Datum params[3] = {candidate.scope, candidate.key, candidate.request_hash};
  // As the worker claims: its role is the bootstrap superuser (scope_owner.hpp).
  judge_as(BOOTSTRAP_SUPERUSERID);
  uint64 rows = spi_run(session, Statement::completer_claim, params, nullptr);
  judge_as(InvalidOid);
  if (rows != 1) return ownership;
  char *kind = spi_copy_text(session, 0, 1);
  bool isnull;
  int64 fence = spi_int64(session, 0, 2, &isnull);
  if (isnull || strcmp(kind, "replay_success") == 0 || strcmp(kind, "final_failure") == 0 ||
      strcmp(kind, "processing_active") == 0)
    return ownership;
  ownership.owned = true;
  ownership.fence = fence;
  ownership.recovery_point = spi_copy_datum(session, 0, 3, &ownership.recovery_point_null);
  ownership.attempt_count = DatumGetInt32(spi_copy_datum(session, 0, 4, &isnull));
  return ownership;
}


char *temp_objects(SpiSession *session) {
  (void)spi_run(session, Statement::session_temp_objects, nullptr, nullptr);
  char *objects = spi_copy_text(session, 0, 1);
  return objects != nullptr ? objects : pstrdup("");
}

// Calls the completer by OID, as completer_worker.cpp does: through fmgr
// (a void LANGUAGE sql function returns a null), with the default collation.
void call_completer(Oid function, const Candidate &candidate, const CallOwnership &ownership) {
  FmgrInfo *flinfo = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo)));
  fmgr_info(function, flinfo);
  // A STRICT completer is not called with a null recovery point, as SQL
  // would not call it; it recorded nothing, which the call reports.
  if (flinfo->fn_strict && ownership.recovery_point_null) return;
  FunctionCallInfo call = static_cast<FunctionCallInfo>(palloc0(SizeForFunctionCallInfo(5)));
  InitFunctionCallInfoData(*call, flinfo, 5, DEFAULT_COLLATION_OID, nullptr, nullptr);
  call->args[0] = NullableDatum{candidate.scope, false};
  call->args[1] = NullableDatum{candidate.key, false};
  call->args[2] = NullableDatum{Int64GetDatum(ownership.fence), false};
  call->args[3] = NullableDatum{ownership.recovery_point, ownership.recovery_point_null};
  call->args[4] = NullableDatum{Int32GetDatum(ownership.attempt_count), false};
  (void)FunctionCallInvoke(call);
}

// Inside the completer's subtransaction: the call as the owner, a
// security-restricted operation, with its own level of settings, undone
// whether it commits or not (as index builds do for a table owner's
// functions). Any error leaves the restoring to the subtransaction's abort.
void run_as_owner(Oid owner, Oid function, const Candidate &candidate,
                  const CallOwnership &ownership) {
  Oid caller;
  int security_context;
  GetUserIdAndSecContext(&caller, &security_context);
  SetUserIdAndSecContext(owner, security_context | SECURITY_LOCAL_USERID_CHANGE |
                                    SECURITY_RESTRICTED_OPERATION);
  int settings_level = NewGUCNestLevel();
  // The completer's calls are judged as its owner's, as in its own process.
  judge_as(owner);
  call_completer(function, candidate, ownership);
  judge_as(InvalidOid);
  AtEOXact_GUC(false, settings_level);
  SetUserIdAndSecContext(caller, security_context);
}

enum class CallEnd { returned, raised };

// One completer in a subtransaction of its own; statics keep what PG_TRY
// sets, so no local needs to be volatile.
CallEnd run_in_subtransaction(SpiSession *session, Oid owner, const Candidate &candidate,
                              const CallOwnership &ownership) {
  static CallEnd end;
  static char *before;
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner resource_owner = CurrentResourceOwner;
  before = temp_objects(session);
  BeginInternalSubTransaction(nullptr);
  MemoryContextSwitchTo(context);
  PG_TRY();
  {
    run_as_owner(owner, candidate.completer, candidate, ownership);
    char *after = temp_objects(session);
    if (strcmp(before, after) != 0)
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("the completer left an object in the session's temporary schema"),
                      errdetail("Temporary objects before: \"%s\"; after: \"%s\".", before, after),
                      errhint("A completer run by idem.run_maintenance may not leave temporary "
                              "objects for the caller or the next completer.")));
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = resource_owner;
    end = CallEnd::returned;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData *error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = resource_owner;
    // A cancel or statement_timeout ends the whole call, as it would end
    // the worker's round: only the completer's own errors are its failures.
    if (error->sqlerrcode == ERRCODE_QUERY_CANCELED) ReThrowError(error);
    ereport(WARNING,
            (errcode(error->sqlerrcode),
             errmsg("idem completer %s for scope \"%s\", key \"%s\" failed: %s",
                    format_procedure(candidate.completer), TextDatumGetCString(candidate.scope),
                    TextDatumGetCString(candidate.key), error->message),
             errdetail("Its work is undone; the key stays claimed until its lock runs out, then "
                       "a later round tries again.")));
    FreeErrorData(error);
    end = CallEnd::raised;
  }
  PG_END_TRY();
  return end;
}

bool outcome_recorded(SpiSession *session, const Candidate &candidate, int64 fence) {
  Datum params[2] = {candidate.scope, candidate.key};
  bool done = false;
  if (spi_run(session, Statement::key_fence_and_status, params, nullptr) == 1) {
    char *status = spi_copy_text(session, 0, key_status_column);
    bool isnull;
    done = spi_int64(session, 0, key_fence_column, &isnull) == fence &&
           strcmp(status, "processing") != 0;
  }
  if (!done)
    ereport(LOG, (errmsg("idem completer %s recorded no outcome for scope \"%s\", key \"%s\"",
                         format_procedure(candidate.completer),
                         TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
                  errdetail("The key stays processing until its lock runs out; a later round "
                            "tries again.")));
  return done;
}

enum class KeyEnd { not_owned, succeeded, failed };

KeyEnd complete_one(SpiSession *session, const Candidate &candidate) {
  CallOwnership ownership = claim(session, candidate);
  if (!ownership.owned) return KeyEnd::not_owned;
  stats::count(stats::Counter::completer_runs);
  Oid owner;
  const char *reason = completer_not_runnable(candidate.completer, &owner);
  if (reason != nullptr) {
    ereport(WARNING,
            (errmsg("idem completer %s for scope \"%s\", key \"%s\" cannot be run",
                    OidIsValid(owner) ? format_procedure(candidate.completer)
                                      : psprintf("%u", candidate.completer),
                    TextDatumGetCString(candidate.scope), TextDatumGetCString(candidate.key)),
             errdetail_internal("%s", reason),
             errhint("Fix the completer of the scope in idem.scope_policy, or its owner; the key "
                     "stays claimed until its lock runs out, then a later round tries again.")));
    return KeyEnd::failed;
  }
  if (run_in_subtransaction(session, owner, candidate, ownership) == CallEnd::raised)
    return KeyEnd::failed;
  return outcome_recorded(session, candidate, ownership.fence) ? KeyEnd::succeeded
                                                               : KeyEnd::failed;
}

}  // namespace

void run_completers_in_call(SpiSession *session, int32 limit, int max_batches,
                            CompleterTotals *totals) {
  if (!OidIsValid(catalog_cache::relation_oid(catalog_cache::IdemRelation::scope_policy)))
    return;  // a 1.0 schema: no policies
  totals->exhausted += exhaust_attempts(session, limit, max_batches, &totals->full_batch);
  Candidate *candidates = nullptr;
  int count = load_candidates(session, limit, &candidates);
  if (count == limit) totals->full_batch = true;
  for (int i = 0; i < count; ++i) {
    CHECK_FOR_INTERRUPTS();
    KeyEnd end = complete_one(session, candidates[i]);
    if (end == KeyEnd::not_owned) continue;  // a client's retry (or the limit) came first
    totals->runs += 1;
    if (end == KeyEnd::succeeded) {
      totals->successes += 1;
      stats::count(stats::Counter::completer_successes);
    } else {
      totals->failures += 1;
      stats::count(stats::Counter::completer_failures);
    }
  }
}

// Why the completer cannot run as its owner, or nullptr; *owner is the
// function's owner when it exists (completer_call.hpp).
const char *completer_not_runnable(Oid function, Oid *owner) {
  *owner = InvalidOid;
  HeapTuple proc = OidIsValid(function) ? SearchSysCache1(PROCOID, ObjectIdGetDatum(function))
                                        : nullptr;
  if (!HeapTupleIsValid(proc)) return "The function no longer exists.";
  *owner = reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc))->proowner;
  ReleaseSysCache(proc);
  const char *role = GetUserNameFromId(*owner, true);
  if (role == nullptr) return "Its owner no longer exists.";
  if (!compat::may_execute(function, *owner))
    return psprintf("Its owner, role \"%s\", may not execute it.", role);
  return nullptr;
}

}  // namespace idem
