#include "pg/guard.hpp"

#include "pg/message_text.hpp"

namespace idem {

namespace {

constexpr size_t cut_mark_length = 3;  // "..."

// Byte copy, no Postgres call: a text that does not fit keeps room for the
// cut mark, and *cut says so; the cut is moved to a character boundary by
// finish_cut, outside the catch block.
void copy_bounded(char *dest, size_t size, const char *src, bool *cut) noexcept {
  size_t n = std::strlen(src);
  *cut = n >= size;
  if (*cut) n = size - 1 - cut_mark_length;
  std::memcpy(dest, src, n);
  dest[n] = '\0';
}

// The copied bytes may end inside a multibyte character: drop the partial
// character and mark the cut.
void finish_cut(char *text, bool cut) {
  if (!cut) return;
  int bytes = static_cast<int>(std::strlen(text));
  int kept = message_text::clip_bytes(text, bytes, bytes);
  std::memcpy(text + kept, "...", cut_mark_length + 1);
}

}  // namespace

void capture_error(CapturedError *out, const char *sqlstate, const char *message,
                   const char *detail, const char *hint) noexcept {
  bool sqlstate_cut;
  copy_bounded(out->sqlstate, sizeof out->sqlstate, sqlstate, &sqlstate_cut);
  copy_bounded(out->message, sizeof out->message, message, &out->message_cut);
  copy_bounded(out->detail, sizeof out->detail, detail, &out->detail_cut);
  copy_bounded(out->hint, sizeof out->hint, hint, &out->hint_cut);
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

void report_captured_error(CapturedError *error) {
  finish_cut(error->message, error->message_cut);
  finish_cut(error->detail, error->detail_cut);
  finish_cut(error->hint, error->hint_cut);
  const char *s = error->sqlstate;
  ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
                  errmsg_internal("%s", error->message),
                  error->has_detail ? errdetail_internal("%s", error->detail) : 0,
                  error->has_hint ? errhint("%s", error->hint) : 0));
  pg_unreachable();
}

}  // namespace idem
