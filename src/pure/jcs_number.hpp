// RFC 8785 numbers (section 3.2.2.3): the canonical form of a JSON number is
// ECMAScript's Number::toString of the IEEE 754 double it reads as. Shared by
// the canonicalizer (jcs.cpp), which scans the number, and jcs_number.cpp,
// which writes it. Pure C++, like jcs.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace idem::jcs {

// A number as RFC 8259 writes it, already scanned: its sign, the digits of
// its integer and fraction parts (either may have leading or trailing
// zeros), and its written exponent (saturated far beyond any double's range).
struct WrittenNumber {
  bool negative;
  std::string_view integer_digits;
  std::string_view fraction_digits;
  std::int64_t exponent;
};

// Appends the number's canonical form to out and returns true; or, when that
// form would not be numerically equal to what was written (docs/design.md:
// two amounts must never share a fingerprint), appends nothing, sets *why to
// the reason (the end of an inexact_number error's detail) and returns false.
// Compares decimal digits and exponents, never doubles, in time linear in
// the number's length.
bool append_canonical_number(const WrittenNumber &number, std::string &out, std::string *why);

}  // namespace idem::jcs
