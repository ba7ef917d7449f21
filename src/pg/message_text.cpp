#include "pg/message_text.hpp"

namespace idem::message_text {

char *excerpt(const char *data, int bytes, int max_chars) {
  int kept = pg_mbcharcliplen(data, bytes, max_chars);
  if (kept >= bytes) return pnstrdup(data, bytes);
  return psprintf("%.*s...", kept, data);
}

char *excerpt(const text *value, int max_chars) {
  return excerpt(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value), max_chars);
}

char *excerpt(const char *value) {
  return excerpt(value, static_cast<int>(strlen(value)));
}

const char *quoted(const text *value, int max_chars) {
  if (value == nullptr) return "NULL";
  return quote_literal_cstr(excerpt(value, max_chars));
}

int clip_bytes(const char *s, int bytes, int max_bytes) {
  if (bytes <= max_bytes) return bytes;
  // pg_mbcliplen walks whole characters by their lead bytes and stops before
  // one that would pass the limit; it raises nothing.
  return pg_mbcliplen(s, bytes, max_bytes);
}

}  // namespace idem::message_text
