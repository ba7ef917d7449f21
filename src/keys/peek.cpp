// idem.peek: a read by key alone for the request path (docs/contract.md, "Calls
// that adapters need"): what a claim with the stored request hash would
// answer, from one key probe (key_probe.hpp), with no SPI write, no row lock,
// no transaction id and no ownership, so it works in a READ ONLY
// transaction and on a standby. It reveals only what a replay would: the
// answer a claim returns, without a fence. NULL for a key a claim would
// start afresh (missing, or finished and past expires_at).
#include "base/arguments.hpp"
#include "keys/claim.hpp"
#include "pg/guard.hpp"
#include "policy/scope_owner.hpp"
#include "keys/statement_memo.hpp"

namespace idem {

namespace {

Datum peek(FunctionCallInfo fcinfo) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  require_scope_owner(scope);
  HeapTuple result;
  if (!peek_once(fcinfo, scope, key, &result)) PG_RETURN_NULL();
  return HeapTupleGetDatum(result);
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION_PER_ROW(peek, idem::peek)

}  // extern "C"
