// One answer per row: every column of `SELECT (f(...)).*` comes from one
// call of f, for the functions that return idem.claim (the claims and the
// marks that return the stored answer).
//
// Why: PostgreSQL expands `(f(...)).*` into one call of f per column of
// idem.claim. Without this, the first call of a claim takes the key (a fence)
// and the next ones see it taken (no fence), so the row the caller reads
// mixes the answers and the key stays locked with a fence nobody saw; the
// first call of mark_succeeded_returning finishes the key and the next ones
// fail, the key already finished.
//
// The rule (docs/internals.md, "A claim within one statement", says why each
// part is needed): a call gets an earlier call's answer instead of calling
// again only if all of these hold, and calls the function otherwise:
//   - same function, byte-equal arguments;
//   - the same row: the calls run in the same per-row memory context
//     (CurrentMemoryContext), which has not been reset since the answer was
//     made. The executor resets it before the next row; PL/pgSQL after each
//     statement; so no answer crosses rows or statements;
//   - nothing written since: no statement idem ran in this backend since the
//     answer was made (backend_writes.hpp: every mark, set_recovery_point,
//     extend_lock, evict, force_expire, purge, sweep, and any claim that
//     wrote), the command id has not moved, and the same subtransaction;
//   - the calling expression (its FmgrInfo) has not taken this answer
//     already: the same expression evaluated again is a new call.
// So the only reuse is the other columns of one row, whatever other
// transactions commit meanwhile. Not covered (a new call claims again):
// columns of one (f(...)).* that PostgreSQL computes in two plan nodes (a
// column used as ORDER BY key is computed before the sort, the others after;
// write the call in FROM instead), and a column between them that makes idem
// write. The memo holds a few answers, only of the current row, in a
// context under TopTransactionContext ("idem claim memo"): its memory does
// not grow with the number of calls.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// Runs body(fcinfo) unless this row already has its answer (the rule above),
// which is then returned again. body must return an idem.claim and take
// only arguments of fixed-length or varlena types.
Datum once_per_row(FunctionCallInfo fcinfo, Datum (*body)(FunctionCallInfo));

}  // namespace idem

// IDEM_SQL_FUNCTION (guard.hpp) for a function whose calls of one row's
// columns share one answer: the guard around once_per_row(fcinfo, body).
#define IDEM_SQL_FUNCTION_PER_ROW(sql_name, body)                                 \
  PG_FUNCTION_INFO_V1(idem_##sql_name);                                           \
  Datum idem_##sql_name(PG_FUNCTION_ARGS) {                                       \
    return idem::run_guarded(                                                     \
        [fcinfo]() -> Datum { return idem::once_per_row(fcinfo, body); });        \
  }
