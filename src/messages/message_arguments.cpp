#include "messages/message_arguments.hpp"

#include "pg/message_text.hpp"

namespace idem::message_arguments {

const text *text_argument(FunctionCallInfo fcinfo, int argno) {
  return PG_ARGISNULL(argno) ? nullptr : PG_GETARG_TEXT_PP(argno);
}

bool name_fits(const text *value) {
  if (value == nullptr) return false;
  int chars = pg_mbstrlen_with_len(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
  return chars >= 1 && chars <= max_name_chars;
}

}  // namespace idem::message_arguments
