// The error boundary between C++ and Postgres (docs/internals.md, "The error boundary").
//
// Postgres reports errors with a longjmp that skips C++ destructors; C++
// reports them with exceptions Postgres cannot catch. So every SQL-callable
// function runs its body through run_guarded():
//   - the body and everything it calls that touches Postgres keep only locals
//     with trivial destructors, so a Postgres error may longjmp through them;
//   - C++ code that owns memory (strings, vectors) never calls Postgres, and
//     reports failure by throwing idem::Error;
//   - run_guarded catches every exception, copies its text into fixed buffers
//     on its own frame (no Postgres call inside a catch block, where a longjmp
//     would strand the exception), and only after the catch has ended calls
//     ereport(); a text too long for its buffer is cut there, at a character
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
// may be called).
struct CapturedError {
  char sqlstate[6];
  char message[1024];
  char detail[4096];
  char hint[1024];
  bool has_detail;
  bool has_hint;
  bool message_cut;
  bool detail_cut;
  bool hint_cut;
};

void capture_error(CapturedError *out, const char *sqlstate, const char *message,
                   const char *detail, const char *hint) noexcept;

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
    capture_error(&error, e.sqlstate(), e.message().c_str(), e.detail().c_str(),
                  e.hint().c_str());
  } catch (const std::bad_alloc &) {
    capture_error(&error, sqlstate::out_of_memory, "out of memory in idem", "", "");
  } catch (const std::exception &e) {
    capture_error(&error, sqlstate::internal, e.what(), "",
                  "This is a bug in idem; please report it.");
  } catch (...) {
    capture_error(&error, sqlstate::internal, "unknown C++ exception in idem", "",
                  "This is a bug in idem; please report it.");
  }
  // An exception thrown out of a PG_TRY: the jump target is gone. The
  // leftover state is the bug worth reporting, not the exception.
  (void)error_handling_intact(entry, &error);
  report_captured_error(&error);
}

}  // namespace idem

// Defines the extern "C" SQL-callable function idem_<sql_name> as one guard
// around body(fcinfo). Use inside an extern "C" block.
#define IDEM_SQL_FUNCTION(sql_name, body)                                         \
  PG_FUNCTION_INFO_V1(idem_##sql_name);                                           \
  Datum idem_##sql_name(PG_FUNCTION_ARGS) {                                       \
    return idem::run_guarded([fcinfo]() -> Datum { return body(fcinfo); });      \
  }
