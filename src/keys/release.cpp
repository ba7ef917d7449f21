// idem.release: the key's owner gives the key up (docs/contract.md, "Calls that
// adapters need"), as an adapter does when its handler failed and a
// corrected request may run under the same key. One fenced DELETE; only when
// it matches no row do we look again, to say why (P4015 missing or not
// owned, P4012 a newer claim owns it).
#include "base/arguments.hpp"
#include "keys/owner_refusal.hpp"
#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "policy/scope_owner.hpp"
#include "pg/spi_session.hpp"
#include "waits/wait_slots.hpp"

namespace idem {

namespace {

Datum release(FunctionCallInfo fcinfo) {
  text *scope;
  text *key;
  KeyName name;
  require_scope_and_key(fcinfo, &scope, &key, &name);
  int64 fence = require_fence(fcinfo, 2, name);
  require_scope_owner(scope);
  Datum params[4] = {PointerGetDatum(scope), PointerGetDatum(key), Int64GetDatum(fence),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
  SpiSession session;
  spi_connect(&session);
  if (spi_run(&session, Statement::release_key, params, nullptr) == 0)
    explain_refusal(&session, name, fence, params, nullptr, sqlstate::release_not_owned,
                    "release");
  spi_finish(&session);
  // A twin waiting in claim_or_wait claims afresh once this commits.
  wait_slots::wake_at_commit(wait_slots::stripe_of(scope, key));
  PG_RETURN_VOID();
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(release, idem::release)

}  // extern "C"
