#include "messages/message_arguments.hpp"

#include "pure/errors.hpp"
#include "pg/message_text.hpp"

namespace idem::message_arguments {

const text *text_argument(FunctionCallInfo fcinfo, int argno) {
  return PG_ARGISNULL(argno) ? nullptr : PG_GETARG_TEXT_PP(argno);
}

const char *literal(const text *value, int max_chars) {
  if (value == nullptr) return "NULL";
  return quote_literal_cstr(message_text::excerpt(value, max_chars));
}

const char *excerpt_text(const char *value) {
  return message_text::excerpt(value, static_cast<int>(strlen(value)));
}

bool name_fits(const text *value) {
  if (value == nullptr) return false;
  int chars = pg_mbstrlen_with_len(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
  return chars >= 1 && chars <= max_name_chars;
}

void throw_error(const char *sqlstate, const char *message, const char *detail, const char *hint) {
  throw Error(sqlstate, message, detail, hint);
}

}  // namespace idem::message_arguments
