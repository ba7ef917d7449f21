#include "guard.hpp"

namespace idem {

namespace {
void copy_bounded(char *dest, size_t size, const char *src) noexcept {
  size_t n = std::strlen(src);
  if (n >= size) n = size - 1;
  std::memcpy(dest, src, n);
  dest[n] = '\0';
}
}  // namespace

void capture_error(CapturedError *out, const char *sqlstate, const char *message,
                   const char *detail, const char *hint) noexcept {
  copy_bounded(out->sqlstate, sizeof out->sqlstate, sqlstate);
  copy_bounded(out->message, sizeof out->message, message);
  copy_bounded(out->detail, sizeof out->detail, detail);
  copy_bounded(out->hint, sizeof out->hint, hint);
  out->has_detail = detail[0] != '\0';
  out->has_hint = hint[0] != '\0';
}

bool error_handling_intact(const ErrorHandlingState &entry, CapturedError *error) noexcept {
  if (PG_exception_stack == entry.exception_stack) return true;
  PG_exception_stack = entry.exception_stack;
  error_context_stack = entry.context_stack;
  capture_error(error, sqlstate::internal,
                "idem left a PG_TRY block without PG_END_TRY",
                "PG_exception_stack changed inside a guarded call.",
                "This is a bug in idem; please report it.");
  return false;
}

void report_captured_error(const CapturedError *error) {
  const char *s = error->sqlstate;
  ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
                  errmsg_internal("%s", error->message),
                  error->has_detail ? errdetail_internal("%s", error->detail) : 0,
                  error->has_hint ? errhint("%s", error->hint) : 0));
  pg_unreachable();
}

}  // namespace idem
