// idem.claim_idempotency_key: observe the row without a lock, reading it
// through the primary key without SPI (key_probe.hpp), so a replay runs no
// executor and opens no SPI connection; on a miss, one atomic INSERT ... ON
// CONFLICT DO NOTHING decides the owner (never a SELECT-then-INSERT race);
// otherwise docs/design.md's classification, where a takeover is a
// compare-and-swap on what was observed.
#include "keys/claim.hpp"

#include "pg/guard.hpp"
#include "pure/errors.hpp"
#include "keys/bound_commit.hpp"
#include "keys/fence.hpp"
#include "keys/key_probe.hpp"
#include "pg/catalog_cache.hpp"
#include "policy/scope_owner.hpp"
#include "policy/scope_policy.hpp"
#include "waits/session_binding.hpp"
#include "pg/spi_session.hpp"
#include "keys/statement_memo.hpp"
#include "base/stats.hpp"
#include "waits/wait_slots.hpp"

extern "C" {
#include "utils/typcache.h"
}

namespace idem {

namespace {

// Each lost race means another claim's change committed; eight rounds of
// look-then-write settle any real contention, and past that the caller is
// told to retry.
constexpr int max_claim_steps = 16;
constexpr int claim_row_columns = col_bound_session;
constexpr int claim_result_columns = 1 + col_expires_at - col_fence + 1;

// The OIDs of idem.claim_kind's labels, looked up once per backend (and again
// if the type is ever re-created, or pg_enum changed).
struct ClaimKindOids {
  Oid enum_type;
  uint64 enum_changes;  // catalog_cache::enum_changes() when looked up
  Oid labels[6];
};
ClaimKindOids kind_oids = {InvalidOid, 0, {}};

Oid claim_kind_oid(Oid enum_type, ClaimKind kind) {
  if (kind_oids.enum_type != enum_type || kind_oids.enum_changes != catalog_cache::enum_changes()) {
    kind_oids.enum_changes = catalog_cache::enum_changes();
    for (int i = 0; i < 6; ++i) {
      Datum label = CStringGetDatum(claim_kind_name(static_cast<ClaimKind>(i)));
      kind_oids.labels[i] =
          DatumGetObjectId(DirectFunctionCall2(enum_in, label, ObjectIdGetDatum(enum_type)));
    }
    kind_oids.enum_type = enum_type;
  }
  return kind_oids.labels[static_cast<int>(kind)];
}

// The row a claim statement returned, copied into the caller's memory: it
// outlives the SPI session, and its values may be passed to the next statement.
struct SeenRow {
  bool inserted;
  ObservedRow observed;
  Datum values[claim_row_columns];
  bool nulls[claim_row_columns];
};
IDEM_LONGJMP_SAFE(SeenRow);

Datum column(const SeenRow &row, int col) { return row.values[col - 1]; }
bool true_and_not_null(const SeenRow &row, int col) {
  return !row.nulls[col - 1] && DatumGetBool(column(row, col));
}

// P4002's detail after the scope and key: what is stored, so that an adapter
// can tell "still running with another body" from "finished with another body".
const char *mismatch_detail(Status status) {
  return psprintf("the stored request's status is %s", status_name(status));
}

// Reported at the caller, which read the status.
[[noreturn]] void raise_unclassifiable_status(const char *status,
                                              SourceLocation where = SourceLocation::here()) {
  IDEM_EREPORT_AT(where, (errcode_of(sqlstate::internal),
                          errmsg("idempotency row has a status idem cannot classify"),
                          errdetail("status \"%s\"", status),
                          errhint("This is a bug in idem; please report it.")));
}

// What the row's columns say, for classify(); `status` is the status column's.
void note_observation(SeenRow *row, Status status) {
  row->inserted = true_and_not_null(*row, col_inserted);
  row->observed.exists = true;
  row->observed.status = status;
  row->observed.same_request_hash = true_and_not_null(*row, col_same_hash);
  row->observed.lock_expired = true_and_not_null(*row, col_lock_expired);
  row->observed.expired = true_and_not_null(*row, col_expired);
}

// The status labels' OIDs as the probe and the claim statements read them
// (the statements return the enum: Citus refuses enum_out, which is STABLE,
// in a RETURNING), each learnt at its first
// sight from enum_out and kept per backend, so a replay looks up no label.
// Forgotten when pg_enum changes (catalog_cache::enum_changes): a re-created
// type has new OIDs, and an OID is never matched against labels of a type
// that is gone.
struct KnownStatus {
  Oid label;
  Status status;
};
constexpr int max_known_statuses = 8;
KnownStatus known_statuses[max_known_statuses];
int known_status_count = 0;
uint64 known_statuses_at = 0;  // the enum_changes() they were learnt under

Status status_of_label(Oid label) {
  if (known_statuses_at != catalog_cache::enum_changes()) {
    known_status_count = 0;
    known_statuses_at = catalog_cache::enum_changes();
  }
  for (int i = 0; i < known_status_count; ++i)
    if (known_statuses[i].label == label) return known_statuses[i].status;
  const char *name = DatumGetCString(DirectFunctionCall1(enum_out, ObjectIdGetDatum(label)));
  Status status;
  if (!parse_status(name, &status)) raise_unclassifiable_status(name);
  // enum_out may have processed an invalidation: then the next call starts again.
  if (known_status_count < max_known_statuses) known_statuses[known_status_count++] = {label, status};
  return status;
}

void read_first_row(const SpiSession *session, SeenRow *row) {
  spi_copy_row(session, 0, claim_row_columns, row->values, row->nulls);
  if (row->nulls[col_status - 1]) raise_unclassifiable_status("");
  note_observation(row, status_of_label(DatumGetObjectId(column(*row, col_status))));
}

// The columns the probe reads, and where each goes in a SeenRow: the row as
// the claim statements return it (ClaimColumn, src/pure/statement_text.hpp).
// bound_session is last, as a 1.0 key table does not have it.
const char *const probed_columns[] = {
    "fence",         "attempt_count",   "recovery_point", "response_code",
    "response_body", "result_ref_type", "result_ref_id",  "failure_code",
    "failure_message", "locked_until",  "expires_at",     "status",
    "request_hash",  "bound_session"};
constexpr int probed_count = sizeof probed_columns / sizeof probed_columns[0];
// fence through expires_at land in col_fence onwards, in this order.
constexpr int probed_copied = col_expires_at - col_fence + 1;
constexpr int probed_status = probed_copied;
constexpr int probed_request_hash = probed_copied + 1;
static_assert(probed_count == probed_copied + 3, "status, request_hash and bound_session follow");

// `a` <= `b` for two timestamps, NULL (false and null) when `a` is NULL, as
// the claim statements' locked_until <= $5 and expires_at <= $5.
void set_at_or_before(SeenRow *row, int col, const Datum *values, const bool *nulls, int at,
                      TimestampTz now) {
  row->nulls[col - 1] = nulls[at];
  row->values[col - 1] = BoolGetDatum(!nulls[at] && DatumGetTimestampTz(values[at]) <= now);
}

// The claim's look, without SPI: the key's row read through the primary key
// (key_probe.hpp) into `row`, copied into `into`, with the columns the
// statement computes (the status's label, request_hash = $3, the two
// comparisons with the claim's clock $5) computed here the same way.
bool probe_claim_row(const ClaimRequest *request, MemoryContext into, SeenRow *row) {
  const Datum *params = request->params;
  Datum values[probed_count];
  bool nulls[probed_count];
  bool found = probe_by_key(
      catalog_cache::IdemRelation::key_table, catalog_cache::IdemRelation::key_table_pkey,
      DatumGetTextPP(params[claim_scope]), DatumGetTextPP(params[claim_key]),
      request->key_table_has_binding ? probed_count : probed_count - 1, probed_columns,
      for_key_table(Statement::probe_claim_row, request->key_table_has_binding), into, values,
      nulls);
  if (!found) return false;
  TimestampTz now = DatumGetTimestampTz(params[claim_now]);
  row->values[col_inserted - 1] = BoolGetDatum(false);
  row->nulls[col_inserted - 1] = false;
  // The status stays an OID here: note_observation takes its Status, and a
  // write names it by status_name (claim_once).
  if (nulls[probed_status]) raise_unclassifiable_status("");
  row->values[col_status - 1] = Datum(0);
  row->nulls[col_status - 1] = true;
  row->nulls[col_same_hash - 1] = nulls[probed_request_hash];
  // No hash given (peek): a claim with the stored one.
  if (request->nulls[claim_request_hash] == 'n') {
    row->values[col_same_hash - 1] = BoolGetDatum(true);
    row->nulls[col_same_hash - 1] = false;
  } else if (!nulls[probed_request_hash])
    row->values[col_same_hash - 1] = BoolGetDatum(same_text(
        DatumGetTextPP(values[probed_request_hash]), DatumGetTextPP(params[claim_request_hash])));
  set_at_or_before(row, col_lock_expired, values, nulls, col_locked_until - col_fence, now);
  set_at_or_before(row, col_expired, values, nulls, col_expires_at - col_fence, now);
  for (int i = 0; i < probed_copied; ++i) {
    row->values[col_fence - 1 + i] = values[i];
    row->nulls[col_fence - 1 + i] = nulls[i];
  }
  bool has_binding = request->key_table_has_binding;
  row->values[col_bound_session - 1] = has_binding ? values[probed_count - 1] : Datum(0);
  row->nulls[col_bound_session - 1] = has_binding ? nulls[probed_count - 1] : true;
  note_observation(row, status_of_label(DatumGetObjectId(values[probed_status])));
  return true;
}

// A processing key whose lock still runs but whose bound session ended is
// stale at once; the takeover then matches on that session's token.
bool bound_session_ended(const SeenRow &row) {
  if (row.observed.status != Status::processing || row.observed.lock_expired ||
      row.nulls[col_bound_session - 1])
    return false;
  return !session_binding::alive(DatumGetInt64(column(row, col_bound_session)));
}

bool grants_ownership(ClaimKind kind) {
  return kind == ClaimKind::new_claim || kind == ClaimKind::processing_stale ||
         kind == ClaimKind::retryable_failure;
}

// The types of idem.claim after its kind, in ClaimColumn order from col_fence.
const Oid claim_column_types[claim_result_columns - 1] = {
    INT8OID, INT4OID, TEXTOID, INT4OID, JSONBOID, TEXTOID,
    TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
};

// form_claim writes claim_result_columns values: the result type must have
// exactly those columns (a library and a SQL script that disagree would
// otherwise make it form a tuple past its arrays, or of the wrong types).
void require_claim_type(TupleDesc desc) {
  const char *detail = nullptr;
  if (desc->natts != claim_result_columns)
    detail = psprintf("idem.claim has %d columns; the library returns %d", desc->natts,
                      claim_result_columns);
  for (int i = 1; detail == nullptr && i < claim_result_columns; ++i) {
    Form_pg_attribute attribute = TupleDescAttr(desc, i);
    if (attribute->atttypid != claim_column_types[i - 1])
      detail = psprintf("column %d (%s) of idem.claim is %s; the library returns %s", i + 1,
                        NameStr(attribute->attname), format_type_be(attribute->atttypid),
                        format_type_be(claim_column_types[i - 1]));
  }
  if (detail == nullptr) return;
  ereport(ERROR, (errcode_of(sqlstate::internal),
                  errmsg("idem.claim does not have the columns this library returns"),
                  errdetail_internal("%s", detail),
                  errhint("Reinstall the extension: the library and its SQL script disagree.")));
}

// idem.claim's descriptor, checked and copied once per backend: a claim
// otherwise looks its function up and copies the descriptor each time
// (get_call_result_type). The type cache's identifier changes whenever the
// type does; a copy replaced then is left in CacheMemoryContext, as a claim
// running further up the stack (a trigger's) may still be using it.
struct KnownClaimType {
  Oid type;
  uint64 identifier;
  TupleDesc desc;
};
KnownClaimType known_claim_type = {InvalidOid, 0, nullptr};

TupleDesc claim_result_desc(FunctionCallInfo fcinfo) {
  Oid type = get_fn_expr_rettype(fcinfo->flinfo);
  TypeCacheEntry *entry = OidIsValid(type) ? lookup_type_cache(type, TYPECACHE_TUPDESC) : nullptr;
  if (entry == nullptr || entry->tupDesc == nullptr) {
    // No call expression (a direct call), or not a named composite type.
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
      ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("a claim must return idem.claim")));
    require_claim_type(desc);
    return desc;
  }
  if (known_claim_type.type == type && known_claim_type.identifier == entry->tupDesc_identifier)
    return known_claim_type.desc;
  require_claim_type(entry->tupDesc);
  MemoryContext previous = MemoryContextSwitchTo(CacheMemoryContext);
  TupleDesc copy = CreateTupleDescCopy(entry->tupDesc);
  MemoryContextSwitchTo(previous);
  known_claim_type = {type, entry->tupDesc_identifier, copy};
  return copy;
}

// Forms idem.claim in the current memory context from a row already copied
// out of SPI (so after spi_finish too).
HeapTuple form_claim(TupleDesc desc, ClaimKind kind, const SeenRow &row) {
  Datum values[claim_result_columns];
  bool nulls[claim_result_columns];
  values[0] = ObjectIdGetDatum(claim_kind_oid(TupleDescAttr(desc, 0)->atttypid, kind));
  nulls[0] = false;
  for (int col = col_fence; col <= col_expires_at; ++col) {
    values[1 + col - col_fence] = column(row, col);
    nulls[1 + col - col_fence] = row.nulls[col - 1];
  }
  if (!grants_ownership(kind)) nulls[1 + col_fence - col_fence] = true;
  // A twin still at work reports its lock, not the failure it is retrying.
  if (kind == ClaimKind::processing_active) {
    nulls[1 + col_failure_code - col_fence] = true;
    nulls[1 + col_failure_message - col_fence] = true;
  }
  return heap_form_tuple(desc, values, nulls);
}

[[noreturn]] void refuse_write_when_read_only(SpiSession *session, const KeyName &name) {
  if (session->connected) spi_finish(session);
  ereport(ERROR, (errcode_of(sqlstate::read_only),
                  errmsg("cannot claim this idempotency key in a read-only transaction"),
                  errdetail_key(name),
                  errhint("Only replays of finished keys work read-only; claiming a new, stale or "
                          "failed key writes it, so use a read-write transaction on the "
                          "primary.")));
}

}  // namespace

void prepare_claim(FunctionCallInfo fcinfo, int first_option_arg, ClaimRequest *request) {
  text *scope;
  text *key;
  require_scope_and_key(fcinfo, &scope, &key, &request->name);
  text *request_hash = require_text(fcinfo, 2, sqlstate::request_hash_invalid,
                                    "request_hash", request->name);
  TimestampTz now = GetCurrentTimestamp();
  // The argument, else the scope's policy, else the setting (scope_policy.hpp).
  resolve_claim_policy(fcinfo, first_option_arg + 1, scope, now, request->name,
                       &request->policy);

  request->result_desc = claim_result_desc(fcinfo);

  Datum *params = request->params;
  char *nulls = request->nulls;
  for (int i = 0; i < claim_param_count; ++i) nulls[i] = ' ';
  params[claim_scope] = PointerGetDatum(scope);
  params[claim_key] = PointerGetDatum(key);
  params[claim_request_hash] = PointerGetDatum(request_hash);
  bool no_claimed_by = PG_ARGISNULL(first_option_arg);
  params[claim_claimed_by] = no_claimed_by ? Datum(0) : PG_GETARG_DATUM(first_option_arg);
  nulls[claim_claimed_by] = no_claimed_by ? 'n' : ' ';
  params[claim_now] = TimestampTzGetDatum(now);
  params[claim_lock_timeout] = IntervalPGetDatum(&request->policy.lock_timeout);
  params[claim_retention] = IntervalPGetDatum(&request->policy.retention);
  nulls[claim_retention] = request->policy.expires ? ' ' : 'n';
  request->stripe = wait_slots::stripe_of(scope, key);
  request->key_table_has_binding = catalog_cache::key_table_has_binding();
  bool bind = bind_lock_to_session_for(scope, session_binding::wanted());
  if (bind && !request->key_table_has_binding)
    ereport(ERROR, (errcode_of(sqlstate::not_preloaded),
                    errmsg("idem.bind_lock_to_session needs the extension's 1.1 key table"),
                    errdetail_key(request->name),
                    errhint("Run ALTER EXTENSION idem UPDATE, or turn the setting off.")));
  params[claim_bound_session] = bind ? Int64GetDatum(session_binding::my_token()) : Datum(0);
  nulls[claim_bound_session] = bind ? ' ' : 'n';
}

void claim_once(ClaimRequest *request, ClaimAnswer *answer) {
  Datum *params = request->params;
  char *nulls = request->nulls;
  const KeyName &name = request->name;
  // At every attempt, before the key is read: claim_or_wait's next attempt
  // sees an owner changed while it waited (the check reads the queued
  // invalidations, scope_owner.cpp).
  require_scope_owner(DatumGetTextPP(params[claim_scope]));
  params[claim_now] = TimestampTzGetDatum(GetCurrentTimestamp());
  params[claim_seen_fence] = Datum(0);
  nulls[claim_seen_fence] = 'n';
  params[claim_seen_status] = Datum(0);
  nulls[claim_seen_status] = 'n';
  params[claim_dead_session] = Datum(0);
  nulls[claim_dead_session] = 'n';
  params[claim_new_fence] = Datum(0);
  nulls[claim_new_fence] = 'n';
  answer->bound_session_ended = false;
  // Before anything this claim draws or writes (bound_commit.hpp).
  bool wrote_before = bound_commit::wrote_before();

  bool has_binding = request->key_table_has_binding;
  // Connected at the first write: a replay is the probe alone. What the probe
  // and the statements return is copied to the caller's context either way.
  SpiSession session = {CurrentMemoryContext, false};
  // A READ ONLY transaction (or a hot standby) may still replay.
  bool read_only = XactReadOnly;
  // Look first (the probe), write only what the observation calls for (one
  // kept statement); any write that matches nothing means another claim
  // changed the key: look again.
  bool look = true;
  Statement write = Statement::claim_insert;
  Action pending = Action::insert;
  SeenRow row;
  for (int step = 0; step < max_claim_steps; ++step) {
    bool looked = look;
    uint64 rows;
    if (looked) {
      rows = probe_claim_row(request, session.caller_context, &row) ? 1 : 0;
    } else {
      if (!session.connected) spi_connect(&session);
      rows = spi_run(&session, for_key_table(write, has_binding), params, nulls);
      if (rows > 0) read_first_row(&session, &row);
    }
    look = true;
    if (rows == 0) {
      if (looked) {
        if (read_only) refuse_write_when_read_only(&session, name);
        look = false;
        write = Statement::claim_insert;
      }
      continue;
    }
    ClaimKind kind;
    if (!looked && write == Statement::claim_insert) {
      kind = ClaimKind::new_claim;
    } else if (!looked && write == Statement::claim_give_up) {
      kind = ClaimKind::final_failure;  // max_attempts reached: the key ends here
    } else if (!looked) {
      kind = claim_kind_of(pending);  // a takeover or a new generation
    } else {
      bool ended = bound_session_ended(row);
      if (ended) row.observed.lock_expired = true;
      pending = classify(row.observed);
      switch (pending) {
        case Action::reject_mismatch:
          if (session.connected) spi_finish(&session);
          stats::count(stats::Counter::request_mismatches);
          ereport(ERROR,
                  (errcode_of(sqlstate::request_mismatch),
                   errmsg("idempotency key was already used for a different request"),
                   errdetail_key(name, mismatch_detail(row.observed.status)),
                   errhint("Use a new idempotency key for a new request; a retry must send "
                           "exactly the same request.")));
        case Action::insert:  // not for an observed row; look again
          continue;
        case Action::take_over_stale:
        case Action::take_over_failed:
          look = false;
          write = attempts_exhausted(request->policy, DatumGetInt32(column(row, col_attempt_count)))
                      ? Statement::claim_give_up
                      : Statement::claim_take_over;
          break;
        case Action::regenerate:
          look = false;
          write = Statement::claim_regenerate;
          break;
        case Action::replay_success:
        case Action::replay_failure:
        case Action::report_active:
          break;
      }
      if (!look) {
        if (read_only) refuse_write_when_read_only(&session, name);
        params[claim_seen_fence] = column(row, col_fence);
        nulls[claim_seen_fence] = ' ';
        params[claim_seen_status] = CStringGetTextDatum(status_name(row.observed.status));
        nulls[claim_seen_status] = ' ';
        params[claim_dead_session] = ended ? column(row, col_bound_session) : Datum(0);
        nulls[claim_dead_session] = ended ? ' ' : 'n';
        // Drawn for this write only: one that matches nothing looks again,
        // and the next write draws its own.
        if (write != Statement::claim_give_up) {
          params[claim_new_fence] = Int64GetDatum(fence_above(DatumGetInt64(column(row, col_fence))));
          nulls[claim_new_fence] = ' ';
        }
        answer->bound_session_ended = ended;
        continue;
      }
      kind = claim_kind_of(pending);
    }
    if (session.connected) spi_finish(&session);
    answer->kind = kind;
    answer->result = form_claim(request->result_desc, kind, row);
    answer->locked_until_null = row.nulls[col_locked_until - 1];
    answer->locked_until = DatumGetTimestampTz(column(row, col_locked_until));
    if (kind != ClaimKind::processing_stale) answer->bound_session_ended = false;
    bool bound_owner = grants_ownership(kind) && nulls[claim_bound_session] == ' ';
    if (bound_owner) session_binding::note_bound_stripe(request->stripe);
    if (!looked) bound_commit::note_claim_write(bound_owner, wrote_before);
    return;
  }
  if (session.connected) spi_finish(&session);
  ereport(ERROR,
          (errcode_of(sqlstate::contention),
           errmsg("could not claim the idempotency key: it kept changing under contention"),
           errdetail_key(name),
           errhint("Retry the request; the key is being claimed by many requests at once.")));
}

Datum answer_claim(const ClaimAnswer &answer) {
  stats::count_claim(answer.kind);
  if (answer.bound_session_ended) stats::count(stats::Counter::session_bound_takeovers);
  return HeapTupleGetDatum(answer.result);
}

bool peek_once(FunctionCallInfo fcinfo, text *scope, text *key, HeapTuple *result) {
  ClaimRequest request;
  for (int i = 0; i < claim_param_count; ++i) request.nulls[i] = 'n';
  request.nulls[claim_scope] = request.nulls[claim_key] = request.nulls[claim_now] = ' ';
  request.params[claim_scope] = PointerGetDatum(scope);
  request.params[claim_key] = PointerGetDatum(key);
  request.params[claim_now] = TimestampTzGetDatum(GetCurrentTimestamp());
  request.key_table_has_binding = catalog_cache::key_table_has_binding();
  SeenRow row;
  if (!probe_claim_row(&request, CurrentMemoryContext, &row)) return false;
  if (bound_session_ended(row)) row.observed.lock_expired = true;
  Action action = classify(row.observed);
  if (action == Action::insert || action == Action::regenerate) return false;
  ClaimKind kind = claim_kind_of(action);
  if (action == Action::take_over_stale || action == Action::take_over_failed) {
    const ScopePolicy *policy = scope_policy_for(scope);
    ClaimPolicy limits = {};
    limits.max_attempts = policy == nullptr ? 0 : policy->max_attempts;
    if (attempts_exhausted(limits, DatumGetInt32(column(row, col_attempt_count)))) {
      // The claim would end the key as claim_give_up writes it.
      kind = ClaimKind::final_failure;
      row.values[col_failure_code - 1] = CStringGetTextDatum("too_many_attempts");
      row.nulls[col_failure_code - 1] = false;
      row.values[col_failure_message - 1] =
          CStringGetTextDatum("the key reached its scope's max_attempts");
      row.nulls[col_failure_message - 1] = false;
      row.nulls[col_locked_until - 1] = true;
    }
  }
  // A peek takes no ownership: no fence, whatever a claim would take.
  row.nulls[col_fence - 1] = true;
  *result = form_claim(claim_result_desc(fcinfo), kind, row);
  return true;
}

namespace {

Datum claim_idempotency_key(FunctionCallInfo fcinfo) {
  ClaimRequest request;
  prepare_claim(fcinfo, 3, &request);
  ClaimAnswer answer;
  claim_once(&request, &answer);
  return answer_claim(answer);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION_PER_ROW(claim_idempotency_key, idem::claim_idempotency_key)

}  // extern "C"
