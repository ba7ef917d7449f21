// The error boundary between C++ and Postgres (ENGINEERING.md).
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
//     ereport().
#pragma once

#include <cstring>
#include <exception>
#include <new>

#include "errors.hpp"
#include "pg.hpp"

namespace idem {

// Error text captured while an exception is live, reported once it is gone.
struct CapturedError {
  char sqlstate[6];
  char message[512];
  char detail[1024];
  char hint[512];
  bool has_detail;
  bool has_hint;
};

void capture_error(CapturedError *out, const char *sqlstate, const char *message,
                   const char *detail, const char *hint) noexcept;

// Raises the captured error with ereport(ERROR); never returns.
[[noreturn]] void report_captured_error(const CapturedError *error);

template <typename Body>
Datum run_guarded(Body &&body) {
  CapturedError error;
  try {
    return body();
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
