// The SQL-callable functions: thin extern "C" shims, each one guard around
// the C++ body (guard.hpp explains the error boundary).
#include "guard.hpp"
#include "hashing.hpp"
#include "invariants.hpp"
#include "keystore.hpp"
#include "worker_status.hpp"

namespace {

Datum request_hash_jsonb(FunctionCallInfo fcinfo) {
  Jsonb *document = PG_GETARG_JSONB_P(0);
  char *json = JsonbToCString(nullptr, &document->root, VARSIZE(document));
  // JCS hashes UTF-8; the server may store another encoding.
  char *utf8 = pg_server_to_any(json, static_cast<int>(strlen(json)), PG_UTF8);
  char hex[idem::sha256_hex_length + 1];
  idem::canonical_json_sha256_hex(utf8, strlen(utf8), hex);
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

Datum request_hash_bytea(FunctionCallInfo fcinfo) {
  bytea *bytes = PG_GETARG_BYTEA_PP(0);
  char hex[idem::sha256_hex_length + 1];
  idem::sha256_hex(VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes), hex);
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

}  // namespace

extern "C" {
IDEM_SQL_FUNCTION(claim_idempotency_key, idem::claim_idempotency_key)
IDEM_SQL_FUNCTION(mark_succeeded, idem::mark_succeeded)
IDEM_SQL_FUNCTION(mark_failed, idem::mark_failed)
IDEM_SQL_FUNCTION(set_recovery_point, idem::set_recovery_point)
IDEM_SQL_FUNCTION(purge_expired, idem::purge_expired)
IDEM_SQL_FUNCTION(sweep_stale, idem::sweep_stale)
IDEM_SQL_FUNCTION(request_hash_jsonb, request_hash_jsonb)
IDEM_SQL_FUNCTION(request_hash_bytea, request_hash_bytea)
IDEM_SQL_FUNCTION(worker_status, idem::worker_status)
IDEM_SQL_FUNCTION(request_invariants_hold, idem::request_invariants_hold)
}
