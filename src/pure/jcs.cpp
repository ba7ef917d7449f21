// RFC 8785 canonical JSON. The text is parsed into a flat tree (one Item per
// value, no pointers), each object's members are sorted as it closes, and the
// tree is then written out once: linear in the input, whatever its shape.
#include "pure/pure.hpp"

#include "pure/jcs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "pure/errors.hpp"

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

// Shortens text quoted in error messages, cutting at a UTF-8 boundary so the
// message stays valid UTF-8 for ereport.
std::string abbreviate(std::string_view text, std::size_t max = 40) {
  if (text.size() <= max) return std::string(text);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(char32_t cp, std::string &out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One code point of string content, escaped as RFC 8785 3.2.2.2 prescribes.
void append_escaped(char32_t cp, std::string &out) {
  switch (cp) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\t': out += "\\t"; return;
    case '\n': out += "\\n"; return;
    case '\f': out += "\\f"; return;
    case '\r': out += "\\r"; return;
    default: break;
  }
  if (cp < 0x20) {
    static const char hex[] = "0123456789abcdef";
    out += "\\u00";
    out += hex[cp >> 4];
    out += hex[cp & 0xF];
    return;
  }
  append_utf8(cp, out);
}

// Member names are sorted as arrays of UTF-16 code units (RFC 8785 3.2.3).
void append_utf16(char32_t cp, std::u16string &out) {
  if (cp < 0x10000) {
    out += static_cast<char16_t>(cp);
  } else {
    out += static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10));
    out += static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF));
  }
}

class Parser {
 public:
  Parser(std::string_view text, InterruptPending interrupt_pending)
      : in_(text), interrupt_pending_(interrupt_pending) {}

  std::string run() {
    pool_.reserve(in_.size());
    const Item top = value(0);
    skip_whitespace();
    if (pos_ != in_.size()) fail("unexpected " + describe_next() + " after the JSON value");
    // Scalars plus at most a separator and two brackets per value.
    std::string out;
    out.reserve(pool_.size() + 3 * items_.size() + 2);
    emit(top, out);
    return out;
  }

 private:
  enum class Kind : std::uint8_t { scalar, array, object };
  // scalar: its canonical text is pool_[begin, end); array: its elements are
  // items_[begin, end); object: items_[begin, end) holds name, value, name,
  // value... already in canonical order.
  struct Item {
    std::size_t begin = 0;
    std::size_t end = 0;
    Kind kind = Kind::scalar;
  };
  struct Member {
    std::u16string name;  // decoded, for sorting and duplicate detection
    Item key;
    Item value;
  };

  // Counts a value parsed or written; every interrupt_check_items, asks.
  void tick() {
    if (interrupt_pending_ != nullptr && ++ticks_ % interrupt_check_items == 0 &&
        interrupt_pending_())
      throw Interrupted();
  }

  Item value(int depth) {
    tick();
    skip_whitespace();
    if (pos_ == in_.size()) fail("unexpected end of input, expected a value");
    switch (in_[pos_]) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return string(nullptr);
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default:
        if (in_[pos_] == '-' || is_digit(in_[pos_])) return number();
        fail("unexpected " + describe_next() + ", expected a value");
    }
  }

  void check_depth(int depth) const {
    if (depth > max_depth)
      throw Error(sqlstate::too_deep, "JSON value nested too deeply",
                  "Arrays and objects are nested more than " + std::to_string(max_depth) +
                      " levels deep (at byte offset " + std::to_string(pos_) + ").",
                  "Flatten the request body.");
  }

  Item array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    std::vector<Item> elements;
    skip_whitespace();
    if (pos_ < in_.size() && in_[pos_] == ']') {
      ++pos_;
    } else {
      for (;;) {
        elements.push_back(value(depth));
        skip_whitespace();
        if (pos_ == in_.size()) fail("unterminated array");
        const char c = in_[pos_];
        if (c != ',' && c != ']') fail("unexpected " + describe_next() + ", expected ',' or ']'");
        ++pos_;
        if (c == ']') break;
      }
    }
    const std::size_t begin = items_.size();
    items_.insert(items_.end(), elements.begin(), elements.end());
    return {begin, items_.size(), Kind::array};
  }

  Item object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    std::vector<Member> members;
    skip_whitespace();
    if (pos_ < in_.size() && in_[pos_] == '}') {
      ++pos_;
    } else {
      for (;;) {
        skip_whitespace();
        if (pos_ == in_.size() || in_[pos_] != '"')
          fail("unexpected " + describe_next() + ", expected a member name");
        Member m;
        m.key = string(&m.name);
        skip_whitespace();
        if (pos_ == in_.size() || in_[pos_] != ':')
          fail("unexpected " + describe_next() + ", expected ':'");
        ++pos_;
        m.value = value(depth);
        members.push_back(std::move(m));
        skip_whitespace();
        if (pos_ == in_.size()) fail("unterminated object");
        const char c = in_[pos_];
        if (c != ',' && c != '}') fail("unexpected " + describe_next() + ", expected ',' or '}'");
        ++pos_;
        if (c == '}') break;
      }
    }
    // char16_t is unsigned, so u16string's < is the code-unit order RFC 8785 asks for.
    std::sort(members.begin(), members.end(),
              [](const Member &a, const Member &b) { return a.name < b.name; });
    for (std::size_t i = 1; i < members.size(); ++i) {
      if (members[i].name == members[i - 1].name) {
        const Item &k = members[i].key;
        throw Error(sqlstate::invalid_json, "invalid JSON: duplicate member name",
                    "The member name " + abbreviate(std::string_view(pool_).substr(k.begin, k.end - k.begin)) +
                        " appears more than once in one object.",
                    "RFC 8785 requires I-JSON (RFC 7493), which forbids duplicate member names.");
      }
    }
    const std::size_t begin = items_.size();
    for (const Member &m : members) {
      items_.push_back(m.key);
      items_.push_back(m.value);
    }
    return {begin, items_.size(), Kind::object};
  }

  // Writes the string's canonical text to pool_; `name` (if given) receives
  // it decoded as UTF-16.
  Item string(std::u16string *name) {
    const std::size_t begin = pool_.size();
    ++pos_;  // opening quote
    pool_ += '"';
    for (;;) {
      // Fast path: a run of printable ASCII needing no escape is copied as is.
      std::size_t run = pos_;
      while (run < in_.size()) {
        const unsigned char c = in_[run];
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
        ++run;
      }
      pool_.append(in_.data() + pos_, run - pos_);
      if (name) name->append(in_.begin() + pos_, in_.begin() + run);
      pos_ = run;
      if (pos_ == in_.size()) fail("unterminated string");
      const unsigned char c = in_[pos_];
      if (c == '"') break;
      char32_t cp;
      if (c == '\\') {
        cp = escape();
      } else if (c < 0x20) {
        fail("control character U+00" + std::string(1, "0123456789ABCDEF"[c >> 4]) +
             "0123456789ABCDEF"[c & 0xF] + " must be escaped inside a string");
      } else {
        cp = utf8_sequence();
      }
      append_escaped(cp, pool_);
      if (name) append_utf16(cp, *name);
    }
    ++pos_;  // closing quote
    pool_ += '"';
    return {begin, pool_.size(), Kind::scalar};
  }

  // Reads one backslash escape, a \uXXXX\uXXXX surrogate pair as one.
  char32_t escape() {
    const std::size_t start = pos_;
    ++pos_;  // backslash
    if (pos_ == in_.size()) fail("unterminated string");
    const char c = in_[pos_++];
    switch (c) {
      case '"': return '"';
      case '\\': return '\\';
      case '/': return '/';
      case 'b': return '\b';
      case 'f': return '\f';
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'u': break;
      default: fail_at(start, "invalid escape \\" + printable(c) + " in a string");
    }
    const char32_t unit = hex4(start);
    if (unit >= 0xDC00 && unit <= 0xDFFF) fail_at(start, "lone low surrogate \\u" + hex_text(unit));
    if (unit < 0xD800 || unit > 0xDBFF) return unit;
    if (in_.substr(pos_, 2) != "\\u")
      fail_at(start, "high surrogate \\u" + hex_text(unit) + " not followed by a low surrogate");
    pos_ += 2;
    const char32_t low = hex4(start);
    if (low < 0xDC00 || low > 0xDFFF)
      fail_at(start, "high surrogate \\u" + hex_text(unit) + " not followed by a low surrogate");
    return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }

  char32_t hex4(std::size_t escape_start) {
    char32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = pos_ < in_.size() ? hex_value(in_[pos_]) : -1;
      if (h < 0) fail_at(escape_start, "\\u must be followed by four hexadecimal digits");
      v = v * 16 + static_cast<char32_t>(h);
      ++pos_;
    }
    return v;
  }

  // Decodes one multi-byte UTF-8 sequence, refusing what RFC 3629 forbids:
  // overlong forms, encoded surrogates, code points above U+10FFFF.
  char32_t utf8_sequence() {
    const std::size_t start = pos_;
    const unsigned char lead = in_[pos_];
    int length;
    char32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, cp = lead & 0x0F;
      if (lead == 0xE0) lo = 0xA0;  // overlong
      if (lead == 0xED) hi = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, cp = lead & 0x07;
      if (lead == 0xF0) lo = 0x90;  // overlong
      if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      fail_at(start, "invalid UTF-8 byte 0x" + hex_byte(lead));
    }
    for (int i = 1; i < length; ++i) {
      const std::size_t at = start + i;
      const unsigned char b = at < in_.size() ? static_cast<unsigned char>(in_[at]) : 0;
      const unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
      if (b < min || b > max) fail_at(start, "invalid UTF-8 sequence starting with byte 0x" + hex_byte(lead));
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ = start + length;
    return cp;
  }

  // RFC 8259 number, accepted only when its ECMAScript form is numerically
  // equal to it (docs/design.md): compared as decimal digits and exponent, never
  // as doubles, and in time linear in its length.
  Item number() {
    const std::size_t start = pos_;
    const bool negative = in_[pos_] == '-';
    if (negative) ++pos_;
    const std::size_t int_begin = pos_;
    if (pos_ < in_.size() && in_[pos_] == '0') {
      ++pos_;
    } else if (pos_ < in_.size() && is_digit(in_[pos_])) {
      while (pos_ < in_.size() && is_digit(in_[pos_])) ++pos_;
    } else {
      fail("invalid number: expected a digit after '-'");
    }
    const std::size_t int_end = pos_;
    std::size_t frac_begin = pos_, frac_end = pos_;
    if (pos_ < in_.size() && in_[pos_] == '.') {
      frac_begin = ++pos_;
      while (pos_ < in_.size() && is_digit(in_[pos_])) ++pos_;
      frac_end = pos_;
      if (frac_begin == frac_end) fail("invalid number: expected a digit after '.'");
    }
    // The written exponent saturates far beyond any double's range, yet below
    // where adding a digit count (< 2^62) could overflow.
    std::int64_t exponent = 0;
    if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
      ++pos_;
      bool exponent_negative = false;
      if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) exponent_negative = in_[pos_++] == '-';
      const std::size_t exp_begin = pos_;
      while (pos_ < in_.size() && is_digit(in_[pos_])) {
        exponent = std::min<std::int64_t>(exponent * 10 + (in_[pos_] - '0'), 1'000'000'000'000'000);
        ++pos_;
      }
      if (pos_ == exp_begin) fail("invalid number: expected a digit in the exponent");
      if (exponent_negative) exponent = -exponent;
    }
    const std::string_view text = in_.substr(start, pos_ - start);

    // Digits are indexed across the integer and fraction parts as one string.
    const std::size_t int_len = int_end - int_begin, frac_len = frac_end - frac_begin;
    const std::size_t total = int_len + frac_len;
    auto digit_at = [&](std::size_t i) {
      return i < int_len ? in_[int_begin + i] : in_[frac_begin + (i - int_len)];
    };
    std::size_t first = 0;
    while (first < total && digit_at(first) == '0') ++first;
    const std::size_t begin = pool_.size();
    if (first == total) {  // zero, whatever its sign or exponent
      pool_ += '0';
      return {begin, pool_.size(), Kind::scalar};
    }
    std::size_t last = total - 1;
    while (digit_at(last) == '0') --last;
    const std::size_t count = last - first + 1;
    // Power of ten of the first significant digit.
    const std::int64_t point = static_cast<std::int64_t>(int_len) - 1 - static_cast<std::int64_t>(first) + exponent;

    // Doubles lie within 4.9e-324 .. 1.8e308; outside, no need to convert.
    if (point > 308) inexact(text, "its magnitude is too large for an IEEE 754 double");
    if (point < -324) inexact(text, "its magnitude is too small for an IEEE 754 double (it would become 0)");
    // A shortest round-trip form never has more than 17 digits.
    if (count > 17)
      inexact(text, "it has " + std::to_string(count) +
                        " significant digits, more than an IEEE 754 double keeps (17 at most)");

    Decimal sent;
    sent.negative = negative;
    sent.count = static_cast<int>(count);
    for (std::size_t i = 0; i < count; ++i) sent.digits[i] = digit_at(first + i);
    sent.exponent = static_cast<int>(point);

    // The nearest double, read from the short form "DDDDe-X" (locale-free).
    std::string short_form(sent.digits, count);
    short_form += 'e';
    short_form += std::to_string(sent.exponent - (sent.count - 1));
    double magnitude = 0;
    const auto read = std::from_chars(short_form.data(), short_form.data() + short_form.size(), magnitude);
    if (read.ec == std::errc::result_out_of_range || std::isinf(magnitude) || magnitude == 0)
      inexact(text, point > 0 ? "its magnitude is too large for an IEEE 754 double"
                              : "its magnitude is too small for an IEEE 754 double (it would become 0)");
    if (read.ec != std::errc() || read.ptr != short_form.data() + short_form.size())
      throw Error(sqlstate::internal, "std::from_chars refused a well-formed number");

    Decimal nearest = shortest_decimal(magnitude);
    nearest.negative = negative;
    if (nearest.count != sent.count || nearest.exponent != sent.exponent ||
        !std::equal(sent.digits, sent.digits + count, nearest.digits)) {
      std::string canonical;
      append_ecmascript(nearest, canonical);
      inexact(text, "the nearest IEEE 754 double is written " + canonical + ", a different number");
    }
    append_ecmascript(sent, pool_);
    return {begin, pool_.size(), Kind::scalar};
  }

  [[noreturn]] void inexact(std::string_view text, const std::string &why,
                            SourceLocation where = SourceLocation::here()) const {
    const std::string shown = abbreviate(text);
    throw Error(sqlstate::inexact_number,
                Message("number %s cannot be represented exactly as an IEEE 754 double", shown),
                "The JSON number " + shown + " cannot be canonicalized without changing its value: " + why + ".",
                "Send it as a JSON string to keep every digit.", where);
  }

  Item literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) fail("unexpected " + describe_next() + ", expected a value");
    pos_ += word.size();
    const std::size_t begin = pool_.size();
    pool_ += word;
    return {begin, pool_.size(), Kind::scalar};
  }

  void skip_whitespace() {
    while (pos_ < in_.size()) {
      const char c = in_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++pos_;
    }
  }

  // Recursion depth is bounded by max_depth, as in the parser.
  void emit(const Item &item, std::string &out) {
    tick();
    switch (item.kind) {
      case Kind::scalar:
        out.append(pool_, item.begin, item.end - item.begin);
        return;
      case Kind::array:
        out += '[';
        for (std::size_t i = item.begin; i < item.end; ++i) {
          if (i != item.begin) out += ',';
          emit(items_[i], out);
        }
        out += ']';
        return;
      case Kind::object:
        out += '{';
        for (std::size_t i = item.begin; i < item.end; i += 2) {
          if (i != item.begin) out += ',';
          emit(items_[i], out);
          out += ':';
          emit(items_[i + 1], out);
        }
        out += '}';
        return;
    }
  }

  static std::string hex_byte(unsigned char b) {
    static const char hex[] = "0123456789ABCDEF";
    return {hex[b >> 4], hex[b & 0xF]};
  }
  static std::string hex_text(char32_t unit) {
    return hex_byte(static_cast<unsigned char>(unit >> 8)) + hex_byte(static_cast<unsigned char>(unit & 0xFF));
  }
  static std::string printable(char c) {
    const unsigned char b = static_cast<unsigned char>(c);
    if (b > 0x20 && b < 0x7F) return std::string("'") + c + "'";
    return "(byte 0x" + hex_byte(b) + ")";
  }
  std::string describe_next() const {
    if (pos_ >= in_.size()) return "end of input";
    return "character " + printable(in_[pos_]);
  }

  // The caller's place is the error's LOCATION: the parse step that failed.
  [[noreturn]] void fail(const std::string &what,
                         SourceLocation where = SourceLocation::here()) const {
    fail_at(pos_, what, where);
  }
  [[noreturn]] void fail_at(std::size_t at, const std::string &what,
                            SourceLocation where = SourceLocation::here()) const {
    throw Error(sqlstate::invalid_json, Message("invalid JSON: %s", what),
                "At byte offset " + std::to_string(at) + " of " + std::to_string(in_.size()) + ".",
                "The request body must be one JSON text (RFC 8259) in UTF-8.", where);
  }

  std::string_view in_;
  InterruptPending interrupt_pending_;
  unsigned ticks_ = 0;
  std::size_t pos_ = 0;
  std::string pool_;         // canonical text of every scalar and member name
  std::vector<Item> items_;  // children of every array and object
};

}  // namespace

std::string canonicalize(std::string_view json) { return Parser(json, nullptr).run(); }

std::string canonicalize(std::string_view json, InterruptPending interrupt_pending) {
  return Parser(json, interrupt_pending).run();
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
