// RFC 8785 JSON Canonicalization Scheme (JCS), the input of idem.request_hash.
// Pure C++: no Postgres header, so it can be unit-tested and fuzzed alone.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace idem::jcs {

// Nesting levels of arrays/objects accepted; one more is refused (SQLSTATE
// 54001). It also bounds the parser's recursion, so the stack cannot overflow.
inline constexpr int max_depth = 1000;

// Returns the RFC 8785 canonical form of one JSON text (UTF-8).
// Throws idem::Error: invalid_json for anything RFC 8259 / I-JSON refuses
// (including duplicate member names and invalid UTF-8), too_deep past
// max_depth, inexact_number for a number whose canonical form would not be
// numerically equal to what was sent (docs/design.md: two amounts must never share
// a fingerprint).
std::string canonicalize(std::string_view json);

// Asked every interrupt_check_items values parsed or written: true when the
// caller must stop (a cancel, statement_timeout or terminate is pending).
// Pure code cannot serve the interrupt itself (Postgres would longjmp past
// its destructors), so it stops by throwing Interrupted, and the caller
// serves the interrupt once the C++ frames are gone.
using InterruptPending = bool (*)();
inline constexpr unsigned interrupt_check_items = 1024;

class Interrupted : public std::exception {
 public:
  const char *what() const noexcept override { return "JSON canonicalization interrupted"; }
};

// canonicalize, stopping with Interrupted when interrupt_pending says so.
std::string canonicalize(std::string_view json, InterruptPending interrupt_pending);

// ECMAScript Number::toString of a finite double (shortest round trip):
// 1e21 -> "1e+21", 1.0 -> "1", -0.0 -> "0", 1e-7 -> "1e-7".
// Throws idem::Error (internal) for NaN and infinities, which JSON cannot hold.
std::string ecmascript_number(double value);

}  // namespace idem::jcs
