// The error boundary between C++ and Postgres (docs/internals.md, "The error boundary").
//
// Postgres reports errors with a longjmp that skips C++ destructors; C++
// reports them with exceptions Postgres cannot catch. So every SQL-callable
// function runs its body through run_guarded():
//   - the body and everything it calls that touches Postgres keep only locals
//     with trivial destructors, so a Postgres error may longjmp through them;
//   - code that calls Postgres raises its errors with ereport() where they
//     happen, so LOCATION names the place;
//   - C++ code that owns memory (strings, vectors) never calls Postgres, and
//     reports failure by throwing idem::Error, which carries its throw site;
//   - run_guarded catches every exception, copies its text into fixed buffers
//     on its own frame (no Postgres call inside a catch block, where a longjmp
//     would strand the exception), and only after the catch has ended calls
//     ereport() with the throw site as LOCATION and the Error's format as
//     errmsg's; a text too long for its buffer is cut there, at a character
//     boundary (message_text.hpp), and marked "...";
//   - it checks that the body left PG_exception_stack as it found it: a
//     PG_TRY left by return, break or a C++ throw leaves it pointing into a
//     dead frame, where the next ereport(ERROR) would jump. That is a bug in
//     idem; the guard restores the stack and reports it (P4099) instead.
#pragma once

#include <cstring>
#include <exception>
#include <new>

#include "pure/errors.hpp"
#include "pg/pg.hpp"

namespace idem {

// Error text captured while an exception is live, reported once it is gone.
// Each text is copied whole when it fits; a longer one is copied up to its
// buffer's end less room for "...", and cut to a character boundary when
// reported (the copy runs inside a catch block, where no Postgres function
// may be called). The format and the location's strings are literals,
// which outlive the exception.
struct CapturedError {
  char sqlstate[6];
  const char *format;  // errmsg's format: %s for each argument
  char arguments[Message::max_arguments][1024];
  char detail[4096];
  char hint[1024];
  SourceLocation where;
  bool has_detail;
  bool has_hint;
  bool arguments_cut[Message::max_arguments];
  bool detail_cut;
  bool hint_cut;
};

// A message without arguments, raised at `where`.
void capture_error(CapturedError *out, const char *sqlstate, const char *format,
                   const char *detail, const char *hint, SourceLocation where) noexcept;

// Sets argument i of the captured message.
void capture_argument(CapturedError *out, int i, const char *text) noexcept;

// An idem::Error: its SQLSTATE, format and arguments, detail, hint and throw site.
void capture_error(CapturedError *out, const Error &error) noexcept;

// Raises the captured error with ereport(ERROR); never returns.
[[noreturn]] void report_captured_error(CapturedError *error);

IDEM_LONGJMP_SAFE(CapturedError);

// Where Postgres's error handling stood when a guard was entered.
struct ErrorHandlingState {
  sigjmp_buf *exception_stack;
  ErrorContextCallback *context_stack;
};
IDEM_LONGJMP_SAFE(ErrorHandlingState);

// True when PG_exception_stack is as it was at entry. Otherwise restores it
// (and the error context stack) and describes the bug into *error.
bool error_handling_intact(const ErrorHandlingState &entry, CapturedError *error) noexcept;

template <typename Body>
Datum run_guarded(Body &&body) {
  // Postgres may longjmp through this frame and the body's: the lambda's
  // captures must need no destructor either.
  static_assert(std::is_trivially_destructible_v<std::remove_reference_t<Body>>,
                "run_guarded's body must capture only trivially destructible values");
  const ErrorHandlingState entry = {PG_exception_stack, error_context_stack};
  CapturedError error;
  try {
    Datum result = body();
    if (error_handling_intact(entry, &error)) return result;
  } catch (const Error &e) {
    capture_error(&error, e);
  } catch (const std::bad_alloc &) {
    capture_error(&error, sqlstate::out_of_memory, "out of memory in idem", "", "",
                  SourceLocation::here());
  } catch (const std::exception &e) {
    capture_error(&error, sqlstate::internal, "%s", "",
                  "This is a bug in idem; please report it.", SourceLocation::here());
    capture_argument(&error, 0, e.what());
  } catch (...) {
    capture_error(&error, sqlstate::internal, "unknown C++ exception in idem", "",
                  "This is a bug in idem; please report it.", SourceLocation::here());
  }
  // An exception thrown out of a PG_TRY: the jump target is gone. The
  // leftover state is the bug worth reporting, not the exception.
  (void)error_handling_intact(entry, &error);
  report_captured_error(&error);
}

}  // namespace idem

// ereport(ERROR, ...) reported at `where` (a SourceLocation) instead of the
// line it stands on: for a helper that raises an error on its caller's
// behalf, with `SourceLocation where = SourceLocation::here()` as its last
// parameter, so that LOCATION names the caller. Expands as ereport() does
// (elog.h, PostgreSQL 13 on).
#define IDEM_EREPORT_AT(where, ...)                                        \
  do {                                                                     \
    if (errstart(ERROR, TEXTDOMAIN))                                       \
      __VA_ARGS__, errfinish((where).file, (where).line, (where).function); \
    pg_unreachable();                                                      \
  } while (0)

// Defines the extern "C" SQL-callable function idem_<sql_name> as one guard
// around body(fcinfo). Use inside an extern "C" block.
#define IDEM_SQL_FUNCTION(sql_name, body)                                         \
  PG_FUNCTION_INFO_V1(idem_##sql_name);                                           \
  Datum idem_##sql_name(PG_FUNCTION_ARGS) {                                       \
    return idem::run_guarded([fcinfo]() -> Datum { return body(fcinfo); });      \
  }

// Defines the extern "C" background-worker main idem_<name> (a
// bgw_function_name) as one guard around body(argument). Use inside an
// extern "C" block.
#define IDEM_BGWORKER_MAIN(name, body)                                            \
  PGDLLEXPORT void idem_##name(Datum argument);                                   \
  void idem_##name(Datum argument) {                                              \
    idem::run_guarded([argument]() -> Datum {                                     \
      body(argument);                                                             \
      return 0;                                                                   \
    });                                                                           \
  }
