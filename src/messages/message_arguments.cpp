#include "messages/message_arguments.hpp"

#include "base/arguments.hpp"
#include "pg/message_text.hpp"
#include "pure/errors.hpp"

namespace idem::message_arguments {

const text *text_argument(FunctionCallInfo fcinfo, int argno) {
  return PG_ARGISNULL(argno) ? nullptr : PG_GETARG_TEXT_PP(argno);
}

bool name_fits(const text *value) {
  if (value == nullptr) return false;
  int chars = pg_mbstrlen_with_len(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
  return chars >= 1 && chars <= max_name_chars;
}

void require_interval(FunctionCallInfo fcinfo, int argno, const char *what, bool required,
                      const char *hint) {
  bool null = PG_ARGISNULL(argno);
  if (null ? !required : interval_is_acceptable(PG_GETARG_INTERVAL_P(argno), false)) return;
  ereport(ERROR, (errcode_of(sqlstate::bad_argument),
                  errmsg("%s must be positive and finite", what),
                  errdetail("%s was %s.", what,
                            null ? "NULL"
                                 : DatumGetCString(DirectFunctionCall1(interval_out,
                                                                       PG_GETARG_DATUM(argno)))),
                  errhint("%s", hint)));
}

}  // namespace idem::message_arguments
