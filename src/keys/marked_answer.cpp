// mark_succeeded_returning and mark_failed_returning: the owner's outcome,
// then the key's answer as every replay will carry it (idem.stored_answer).
// C functions, not SQL ones, so that `(f(...)).*` marks once per row
// (statement_memo.hpp): as SQL, each column called the function again, and
// every call after the first found the key finished (P4010, P4011).
#include "pure/errors.hpp"
#include "keys/keystore.hpp"
#include "pg/spi_session.hpp"

namespace idem {

namespace {

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

}  // namespace

Datum mark_succeeded_returning(FunctionCallInfo fcinfo) {
  (void)mark_succeeded(fcinfo);
  return stored_answer(fcinfo);
}

Datum mark_failed_returning(FunctionCallInfo fcinfo) {
  (void)mark_failed(fcinfo);
  return stored_answer(fcinfo);
}

}  // namespace idem
