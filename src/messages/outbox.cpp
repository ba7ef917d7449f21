// The outbox's per-event calls, idem.outbox_put, idem.outbox_lease and
// idem.outbox_published (docs/contract.md "Transactional outbox"; README "Outbox"),
// in C through kept SPI plans because they run for every event.
// outbox_failed stays PL/pgSQL (sql/idem--1.0--1.1.sql, section inbox). The
// errors keep the words of the PL/pgSQL functions they replace.
#include "pure/errors.hpp"
#include "keys/maintenance.hpp"
#include "pg/catalog_cache.hpp"
#include "pg/citus.hpp"
#include "pg/guard.hpp"
#include "messages/message_arguments.hpp"
#include "pg/spi_session.hpp"
#include "policy/scope_owner.hpp"

extern "C" {
#include "catalog/pg_collation.h"
}

namespace idem {

namespace {

using namespace message_arguments;

// The advisory lock class of outbox_put's per-aggregate lock: the four
// bytes of "idem" as an integer, clear of small user keys.
constexpr int32 aggregate_lock_class = 1768187245;
// The columns of outbox_lease's result (its RETURNS TABLE).
constexpr int lease_columns = 11;
// The bytes of scope, key and event_type together that an entry of the
// unique index outbox_event_identity can hold, with its headers and
// alignment, under btree's limit of a third of a page (2,704 bytes).
constexpr int max_identity_bytes = 2600;

void require_event(FunctionCallInfo fcinfo, const text *scope, const text *key,
                   const text *event_type) {
  if (!name_fits(scope))
    ereport(ERROR, (errcode_of(sqlstate::scope_invalid),
                    errmsg("scope must be 1 to 255 characters"),
                    errdetail("scope was %s.", quoted(scope)),
                    errhint("Pass the scope of the key the event belongs to.")));
  if (!name_fits(key))
    ereport(ERROR, (errcode_of(sqlstate::key_invalid), errmsg("key must be 1 to 255 characters"),
                    errdetail("scope %s, key %s.", quoted(scope), quoted(key, too_long_name_chars)),
                    errhint("Pass the idempotency key of the request that produced the event.")));
  if (event_type == nullptr || VARSIZE_ANY_EXHDR(event_type) == 0 || PG_ARGISNULL(3))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("event_type and payload must be given"),
                    errdetail("scope %s, key %s: event_type %s, payload %s.", quoted(scope),
                              quoted(key), quoted(event_type),
                              PG_ARGISNULL(3)
                                  ? "NULL"
                                  : excerpt(DatumGetCString(
                                        DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(3))))),
                    errhint("Name the event type and pass a jsonb payload ('{}' for none).")));
  if (!name_fits(event_type))
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("event_type must be 1 to 255 characters"),
                    errdetail("scope %s, key %s: event_type %s.", quoted(scope), quoted(key),
                              quoted(event_type, too_long_name_chars)),
                    errhint("Name the event type in at most 255 characters, such as "
                            "'order.created'.")));
  for (int argno : {4, 5}) {
    const text *aggregate = text_argument(fcinfo, argno);
    if (aggregate != nullptr && !name_fits(aggregate) && VARSIZE_ANY_EXHDR(aggregate) > 0)
      ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                      errmsg("%s must be at most 255 characters",
                             argno == 4 ? "aggregate_type" : "aggregate_id"),
                      errdetail("scope %s, key %s: %s %s.", quoted(scope), quoted(key),
                                argno == 4 ? "aggregate_type" : "aggregate_id",
                                quoted(aggregate, too_long_name_chars)),
                      errhint("Name the aggregate in at most 255 characters, such as its primary "
                              "key.")));
  }
  // scope, key and event_type are one entry of the outbox's unique index,
  // which holds at most about 2,700 bytes: reachable only with characters of
  // four bytes in all three.
  int identity_bytes = VARSIZE_ANY_EXHDR(scope) + VARSIZE_ANY_EXHDR(key) +
                       VARSIZE_ANY_EXHDR(event_type);
  if (identity_bytes > max_identity_bytes)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                    errmsg("scope, key and event_type are too long together"),
                    errdetail("scope %s, key %s, event_type %s: %d bytes in the server's "
                              "encoding; at most %d fit the outbox's index.",
                              quoted(scope, too_long_name_chars), quoted(key, too_long_name_chars),
                              quoted(event_type, too_long_name_chars), identity_bytes,
                              max_identity_bytes),
                    errhint("Use a shorter event_type.")));
}

// An aggregate's events must commit in id order, or a relay could lease
// event 2 while event 1's transaction is still open (invisible to it) and
// deliver them out of order (bench/README.md, "1.1: inbox and outbox"). So
// puts of one aggregate take a transaction-level advisory lock on it before
// drawing their id: the next put of that aggregate waits for this
// transaction to end.
void lock_aggregate(const text *aggregate_type, const text *aggregate_id) {
  StringInfoData name;
  initStringInfo(&name);
  if (aggregate_type != nullptr)
    appendBinaryStringInfo(&name, VARDATA_ANY(aggregate_type), VARSIZE_ANY_EXHDR(aggregate_type));
  appendStringInfoChar(&name, '/');
  appendBinaryStringInfo(&name, VARDATA_ANY(aggregate_id), VARSIZE_ANY_EXHDR(aggregate_id));
  Datum hash =
      DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID,
                              PointerGetDatum(cstring_to_text_with_len(name.data, name.len)));
  DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(aggregate_lock_class), hash);
}

// outbox_put(scope, key, event_type, payload, aggregate_type, aggregate_id,
// headers, available_at): the event's id, the same id for the same event
// again, P4051 for another payload; NOTIFY idem_outbox at commit.
Datum outbox_put(FunctionCallInfo fcinfo) {
  const text *scope = text_argument(fcinfo, 0);
  const text *key = text_argument(fcinfo, 1);
  const text *event_type = text_argument(fcinfo, 2);
  require_event(fcinfo, scope, key, event_type);
  require_scope_owner(scope);
  if (!PG_ARGISNULL(5)) lock_aggregate(text_argument(fcinfo, 4), text_argument(fcinfo, 5));

  Datum params[9];
  char nulls[10] = "         ";
  for (int i = 0; i < 8; ++i) {
    params[i] = PG_ARGISNULL(i) ? Datum(0) : PG_GETARG_DATUM(i);
    if (PG_ARGISNULL(i)) nulls[i] = 'n';
  }
  params[8] = TimestampTzGetDatum(GetCurrentStatementStartTimestamp());
  SpiSession session;
  spi_connect(&session);
  bool isnull;
  if (spi_run(&session, Statement::outbox_insert, params, nulls) > 0) {
    int64 id = spi_int64(&session, 0, 1, &isnull);
    spi_finish(&session);
    // Delivered at commit only, and never for a rolled-back put.
    DirectFunctionCall2(pg_notify, PointerGetDatum(cstring_to_text("idem_outbox")), params[2]);
    PG_RETURN_INT64(id);
  }
  // The event is there (a twin's insert committed meanwhile is seen too).
  if (spi_run(&session, Statement::outbox_existing, params, nulls) == 0) {
    spi_finish(&session);
    PG_RETURN_NULL();
  }
  int64 id = spi_int64(&session, 0, 1, &isnull);
  bool same_null;
  bool same = DatumGetBool(spi_copy_datum(&session, 0, 2, &same_null));
  spi_finish(&session);
  if (!same_null && !same)
    ereport(ERROR, (errcode_of(sqlstate::event_mismatch),
                    errmsg("outbox event %s of key %s was put with a different payload",
                           quoted(event_type), quoted(key)),
                    errdetail("scope %s, key %s, event_type %s: event " INT64_FORMAT
                              " has another payload.",
                              quoted(scope), quoted(key), quoted(event_type), id),
                    errhint("An event is put once per (scope, key, event_type); a different "
                            "event needs its own key or type.")));
  PG_RETURN_INT64(id);
}

// The rows a lease statement returned, into outbox_lease's result.
void put_leased(const SpiSession *session, uint64 rows, ReturnSetInfo *result) {
  for (uint64 row = 0; row < rows; ++row) {
    Datum values[lease_columns];
    bool isnull[lease_columns];
    spi_copy_row(session, row, lease_columns, values, isnull);
    tuplestore_putvalues(result->setResult, result->setDesc, values, isnull);
  }
}

// outbox_lease(batch_limit, lease, event_types): the due events, leased.
Datum outbox_lease(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0) || PG_GETARG_INT32(0) <= 0)
    ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg("batch_limit must be positive"),
                    PG_ARGISNULL(0) ? errdetail("batch_limit was NULL.")
                                    : errdetail("batch_limit was %d.", PG_GETARG_INT32(0)),
                    errhint("Pass a positive number of rows.")));
  // A lease that is not positive on every calendar would be over when
  // granted, and the next lease would take the same event.
  require_interval(fcinfo, 1, "lease", true, "Pass a lease longer than one delivery takes.");
  InitMaterializedSRF(fcinfo, 0);
  auto *result = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  int natts = result->setDesc->natts;
  if (natts != lease_columns)
    ereport(ERROR,
            (errcode_of(sqlstate::internal),
             errmsg("idem.outbox_lease's result does not have the columns this library returns"),
             errdetail("it has %d columns; the library returns %d", natts, lease_columns),
             errhint("Reinstall the extension: the library and its SQL script disagree.")));
  Datum params[4] = {TimestampTzGetDatum(GetCurrentStatementStartTimestamp()), PG_GETARG_DATUM(1),
                     PG_ARGISNULL(2) ? Datum(0) : PG_GETARG_DATUM(2), PG_GETARG_DATUM(0)};
  char nulls[5] = "    ";
  if (PG_ARGISNULL(2)) nulls[2] = 'n';
  // Loaded before the statement calls idem.may_use_scope row by row (each
  // call is then a lookup); a 1.1 schema has no such function to call.
  Statement lease = scope_owners_loaded() ? Statement::outbox_lease : Statement::outbox_lease_11;
  SpiSession session;
  spi_connect(&session);
  if (!citus::is_citus_table(catalog_cache::IdemRelation::outbox_event)) {
    put_leased(&session, spi_run(&session, lease, params, nulls), result);
  } else {
    // Citus refuses the statement's FOR UPDATE on the distributed table:
    // it runs on each shard of the outbox this node holds instead, by
    // name, up to batch_limit in all (docs/internals.md, "On Citus"). An
    // aggregate's order is kept among the events of one shard; the
    // coordinator holds none and leases nothing.
    Oid *shards;
    uint64 count = local_shards(
        &session, catalog_cache::relation_oid(catalog_cache::IdemRelation::outbox_event), &shards);
    int32 limit = PG_GETARG_INT32(0);
    int32 leased = 0;
    for (uint64 i = 0; i < count && leased < limit; ++i) {
      params[3] = Int32GetDatum(limit - leased);
      OnRelation names[1] = {{"idem.outbox_event", shards[i]}};
      uint64 rows = spi_run_on(&session, lease, names, 1, params, nulls);
      put_leased(&session, rows, result);
      leased += static_cast<int32>(rows);
    }
  }
  spi_finish(&session);
  return Datum(0);
}

// The scope of event `id` (params[0]), or nullptr when no event has that id.
const text *event_scope(Datum *params, const char *nulls) {
  SpiSession session;
  spi_connect(&session);
  bool isnull = true;
  Datum scope = Datum(0);
  if (spi_run(&session, Statement::outbox_event_state, params, nulls) > 0)
    scope = spi_copy_datum(&session, 0, 2, &isnull);
  spi_finish(&session);
  return isnull ? nullptr : DatumGetTextPP(scope);
}

// outbox_published(id, lease_fence): 42501 when the calling role may not use
// the event's scope, P4012 when the lease was lost.
Datum outbox_published(FunctionCallInfo fcinfo) {
  // published_at is the clock at the mark, not the statement's start: a
  // relay whose statement started first may lease an aggregate's next event
  // only after another relay's mark of the one before committed, and the
  // times must say so (bench/messages/run checks the order by them).
  Datum params[3] = {PG_ARGISNULL(0) ? Datum(0) : PG_GETARG_DATUM(0),
                     PG_ARGISNULL(1) ? Datum(0) : PG_GETARG_DATUM(1),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
  char nulls[4] = "   ";
  if (PG_ARGISNULL(0)) nulls[0] = 'n';
  if (PG_ARGISNULL(1)) nulls[1] = 'n';
  // A lease fence orders relays, it authorises nothing (fences come from one
  // sequence): the event's scope is checked first, before its status or
  // fence is compared, so a relay of another tenant learns nothing of them.
  // An id no event has is the lost lease below, as for a member: there is
  // no scope to name.
  if (const text *scope = event_scope(params, nulls)) require_scope_owner(scope);
  SpiSession session;
  spi_connect(&session);
  if (spi_run(&session, Statement::outbox_published, params, nulls) > 0) {
    spi_finish(&session);
    PG_RETURN_VOID();
  }
  // Lost: say what the event's status is now, as idem.outbox_lease_lost
  // does, and no fence but the caller's. The text is copied into the
  // caller's context and formatted after spi_finish: anything palloc'd while
  // connected dies with SPI's context.
  char *status = nullptr;
  if (spi_run(&session, Statement::outbox_event_state, params, nulls) > 0)
    status = spi_copy_text(&session, 0, 1);
  spi_finish(&session);
  const char *state = status == nullptr ? "no such event" : psprintf("status %s", status);
  ereport(ERROR,
          (errcode_of(sqlstate::stale_fence), errmsg("the lease on this outbox event was lost"),
           errdetail("outbox_published(%s, %s): the event is not leased under this fence (%s).",
                     PG_ARGISNULL(0) ? "" : psprintf(INT64_FORMAT, PG_GETARG_INT64(0)),
                     PG_ARGISNULL(1) ? "NULL" : psprintf(INT64_FORMAT, PG_GETARG_INT64(1)), state),
           errhint("Another relay leased the event after this lease ran out; drop the result, do "
                   "not retry it.")));
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(outbox_put, idem::outbox_put)
IDEM_SQL_FUNCTION(outbox_lease, idem::outbox_lease)
IDEM_SQL_FUNCTION(outbox_published, idem::outbox_published)

}  // extern "C"
