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

void capture_error(CapturedError *out, const char *sqlstate, const char *format,
                   const char *detail, const char *hint, SourceLocation where) noexcept {
  bool sqlstate_cut;
  copy_bounded(out->sqlstate, sizeof out->sqlstate, sqlstate, &sqlstate_cut);
  out->format = format;
  for (int i = 0; i < Message::max_arguments; ++i) {
    out->arguments[i][0] = '\0';
    out->arguments_cut[i] = false;
  }
  copy_bounded(out->detail, sizeof out->detail, detail, &out->detail_cut);
  copy_bounded(out->hint, sizeof out->hint, hint, &out->hint_cut);
  out->has_detail = detail[0] != '\0';
  out->has_hint = hint[0] != '\0';
  out->where = where;
}

void capture_argument(CapturedError *out, int i, const char *text) noexcept {
  copy_bounded(out->arguments[i], sizeof out->arguments[i], text, &out->arguments_cut[i]);
}

void capture_error(CapturedError *out, const Error &error) noexcept {
  const Message &message = error.message_format();
  capture_error(out, error.sqlstate(), message.format(), error.detail().c_str(),
                error.hint().c_str(), error.where());
  for (int i = 0; i < message.argument_count(); ++i)
    capture_argument(out, i, message.argument(i).c_str());
}

bool error_handling_intact(const ErrorHandlingState &entry, CapturedError *error) noexcept {
  if (PG_exception_stack == entry.exception_stack) return true;
  PG_exception_stack = entry.exception_stack;
  error_context_stack = entry.context_stack;
  capture_error(error, sqlstate::internal,
                "idem left a PG_TRY block without PG_END_TRY",
                "PG_exception_stack changed inside a guarded call.",
                "This is a bug in idem; please report it.", SourceLocation::here());
  return false;
}

// ereport() spelled out (elog.h, PostgreSQL 13 on), so that errfinish gets
// the throw site instead of this line: the LOCATION of a pure C++ error is
// where it was thrown.
void report_captured_error(CapturedError *error) {
  for (int i = 0; i < Message::max_arguments; ++i)
    finish_cut(error->arguments[i], error->arguments_cut[i]);
  finish_cut(error->detail, error->detail_cut);
  finish_cut(error->hint, error->hint_cut);
  const char *s = error->sqlstate;
  if (errstart(ERROR, TEXTDOMAIN)) {
    errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]));
    errmsg(error->format, error->arguments[0], error->arguments[1]);
    if (error->has_detail) errdetail_internal("%s", error->detail);
    if (error->has_hint) errhint("%s", error->hint);
    errfinish(error->where.file, error->where.line, error->where.function);
  }
  pg_unreachable();
}

}  // namespace idem
