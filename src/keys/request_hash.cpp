// idem.request_hash(jsonb) and idem.request_hash(bytea): the Postgres side of
// hashing.hpp (the document as UTF-8 text, canonicalised by jcs.hpp).
#include "pg/guard.hpp"
#include "pure/hashing.hpp"

namespace idem {

namespace {

// What the canonicalizer asks (jcs.hpp): an interrupt that CHECK_FOR_INTERRUPTS
// would serve now and that ends the statement (a cancel, statement_timeout,
// a terminate). Reading the flags calls nothing that can raise.
bool statement_interrupt_pending() {
  return INTERRUPTS_PENDING_CONDITION() && INTERRUPTS_CAN_BE_PROCESSED() &&
         (QueryCancelPending || ProcDiePending);
}

Datum request_hash_jsonb(FunctionCallInfo fcinfo) {
  Jsonb *document = PG_GETARG_JSONB_P(0);
  char *json = JsonbToCString(nullptr, &document->root, VARSIZE(document));
  CHECK_FOR_INTERRUPTS();
  // JCS hashes UTF-8; the server may store another encoding.
  char *utf8 = pg_server_to_any(json, static_cast<int>(strlen(json)), PG_UTF8);
  char hex[sha256_hex_length + 1];
  // A large document takes a while: the canonicalizer stops when an
  // interrupt is pending, and it is served here, where no C++ object lives.
  // A cancel that Postgres ignores after all clears its flag, and the work
  // starts again.
  while (!canonical_json_sha256_hex(utf8, strlen(utf8), hex, statement_interrupt_pending))
    CHECK_FOR_INTERRUPTS();
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

Datum request_hash_bytea(FunctionCallInfo fcinfo) {
  bytea *bytes = PG_GETARG_BYTEA_PP(0);
  char hex[sha256_hex_length + 1];
  sha256_hex(VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes), hex);
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

}  // namespace

}  // namespace idem

extern "C" {

IDEM_SQL_FUNCTION(request_hash_jsonb, idem::request_hash_jsonb)
IDEM_SQL_FUNCTION(request_hash_bytea, idem::request_hash_bytea)

}  // extern "C"
