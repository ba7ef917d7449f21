// RFC 8785 numbers: a number the parser scanned, written as ECMAScript's
// Number::toString of the double it reads as, and refused when that form
// would be a different number; and ecmascript_number (jcs.hpp) for a double.
#include "pure/pure.hpp"

#include "pure/jcs_number.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include "pure/errors.hpp"
#include "pure/jcs.hpp"

namespace idem::jcs {
namespace {

// A nonzero decimal d1.d2...dk x 10^exponent, digits without leading or
// trailing zeros; count == 0 stands for zero. A double needs at most 17.
struct Decimal {
  bool negative = false;
  int count = 0;
  char digits[17] = {};
  int exponent = 0;
};

// The shortest digits that read back as `value`; among equally short ones
// std::to_chars takes the closest, which is also ECMAScript's choice.
Decimal shortest_decimal(double value) {
  Decimal d;
  if (value == 0) return d;  // -0 too: ECMAScript prints both as "0"
  // Scientific form, e.g. "-1.2345e-07"; the longest is 24 characters.
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  if (res.ec != std::errc()) throw Error(sqlstate::internal, "std::to_chars failed");
  const char *p = buf;
  if (*p == '-') {
    d.negative = true;
    ++p;
  }
  for (; p < res.ptr && *p != 'e'; ++p) {
    if (*p == '.') continue;
    if (d.count == 17) throw Error(sqlstate::internal, "std::to_chars gave more than 17 digits");
    d.digits[d.count++] = *p;
  }
  // Skip 'e', read the always-present sign, then the exponent digits.
  const bool negative_exponent = p + 1 < res.ptr && p[1] == '-';
  int exponent = 0;
  for (p += 2; p < res.ptr; ++p) exponent = exponent * 10 + (*p - '0');
  d.exponent = negative_exponent ? -exponent : exponent;
  while (d.count > 1 && d.digits[d.count - 1] == '0') --d.count;
  return d;
}

// ECMAScript Number::toString (ECMA-262 7.1.12.1, step 5 on), with k digits
// and n the position of the decimal point relative to them.
void append_ecmascript(const Decimal &d, std::string &out) {
  if (d.count == 0) {
    out += '0';
    return;
  }
  if (d.negative) out += '-';
  const int k = d.count;
  const int n = d.exponent + 1;
  const char *digits = d.digits;
  if (k <= n && n <= 21) {  // integer: digits then zeros
    out.append(digits, k);
    out.append(n - k, '0');
  } else if (0 < n && n <= 21) {  // point inside the digits
    out.append(digits, n);
    out += '.';
    out.append(digits + n, k - n);
  } else if (-6 < n && n <= 0) {  // small: 0.000ddd
    out += "0.";
    out.append(-n, '0');
    out.append(digits, k);
  } else {  // exponent form, the sign of the exponent always written
    out += digits[0];
    if (k > 1) {
      out += '.';
      out.append(digits + 1, k - 1);
    }
    out += 'e';
    out += n - 1 < 0 ? '-' : '+';
    out += std::to_string(std::abs(n - 1));
  }
}

}  // namespace

bool append_canonical_number(const WrittenNumber &number, std::string &out, std::string *why) {
  // Digits are indexed across the integer and fraction parts as one string.
  const std::string_view integer = number.integer_digits, fraction = number.fraction_digits;
  const std::size_t int_len = integer.size();
  const std::size_t total = int_len + fraction.size();
  auto digit_at = [&](std::size_t i) { return i < int_len ? integer[i] : fraction[i - int_len]; };
  std::size_t first = 0;
  while (first < total && digit_at(first) == '0') ++first;
  if (first == total) {  // zero, whatever its sign or exponent
    out += '0';
    return true;
  }
  std::size_t last = total - 1;
  while (digit_at(last) == '0') --last;
  const std::size_t count = last - first + 1;
  // Power of ten of the first significant digit.
  const std::int64_t point =
      static_cast<std::int64_t>(int_len) - 1 - static_cast<std::int64_t>(first) + number.exponent;

  const char *const too_large = "its magnitude is too large for an IEEE 754 double";
  const char *const too_small = "its magnitude is too small for an IEEE 754 double (it would become 0)";
  // Doubles lie within 4.9e-324 .. 1.8e308; outside, no need to convert.
  if (point > 308) {
    *why = too_large;
    return false;
  }
  if (point < -324) {
    *why = too_small;
    return false;
  }
  // A shortest round-trip form never has more than 17 digits.
  if (count > 17) {
    *why = "it has " + std::to_string(count) +
           " significant digits, more than an IEEE 754 double keeps (17 at most)";
    return false;
  }

  Decimal sent;
  sent.negative = number.negative;
  sent.count = static_cast<int>(count);
  for (std::size_t i = 0; i < count; ++i) sent.digits[i] = digit_at(first + i);
  sent.exponent = static_cast<int>(point);

  // The nearest double, read from the short form "DDDDe-X" (locale-free).
  std::string short_form(sent.digits, count);
  short_form += 'e';
  short_form += std::to_string(sent.exponent - (sent.count - 1));
  double magnitude = 0;
  const auto read = std::from_chars(short_form.data(), short_form.data() + short_form.size(), magnitude);
  if (read.ec == std::errc::result_out_of_range || std::isinf(magnitude) || magnitude == 0) {
    *why = point > 0 ? too_large : too_small;
    return false;
  }
  if (read.ec != std::errc() || read.ptr != short_form.data() + short_form.size())
    throw Error(sqlstate::internal, "std::from_chars refused a well-formed number");

  Decimal nearest = shortest_decimal(magnitude);
  nearest.negative = number.negative;
  if (nearest.count != sent.count || nearest.exponent != sent.exponent ||
      !std::equal(sent.digits, sent.digits + count, nearest.digits)) {
    std::string canonical;
    append_ecmascript(nearest, canonical);
    *why = "the nearest IEEE 754 double is written " + canonical + ", a different number";
    return false;
  }
  append_ecmascript(sent, out);
  return true;
}

std::string ecmascript_number(double value) {
  if (!std::isfinite(value))
    throw Error(sqlstate::internal, "NaN and infinities have no JSON representation",
                "RFC 8785 section 3.2.2.3 requires an error for them.");
  std::string out;
  append_ecmascript(shortest_decimal(value), out);
  return out;
}

}  // namespace idem::jcs
