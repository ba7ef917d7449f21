#include "request_hash.hpp"

#include "hashing.hpp"

namespace idem {

Datum request_hash_jsonb(FunctionCallInfo fcinfo) {
  Jsonb *document = PG_GETARG_JSONB_P(0);
  char *json = JsonbToCString(nullptr, &document->root, VARSIZE(document));
  // JCS hashes UTF-8; the server may store another encoding.
  char *utf8 = pg_server_to_any(json, static_cast<int>(strlen(json)), PG_UTF8);
  char hex[sha256_hex_length + 1];
  canonical_json_sha256_hex(utf8, strlen(utf8), hex);
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

Datum request_hash_bytea(FunctionCallInfo fcinfo) {
  bytea *bytes = PG_GETARG_BYTEA_PP(0);
  char hex[sha256_hex_length + 1];
  sha256_hex(VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes), hex);
  PG_RETURN_TEXT_P(cstring_to_text(hex));
}

}  // namespace idem
