// RFC 8785 canonical JSON: the parser and the writer. The text is parsed into
// a flat tree (one Item per value, no pointers), each object's members are
// sorted as it closes, and the tree is then written out once: linear in the
// input, whatever its shape. Numbers are written by jcs_number.cpp.
#include "pure/pure.hpp"

#include "pure/jcs.hpp"
#include "pure/jcs_number.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pure/errors.hpp"

namespace idem::jcs {
namespace {

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

  // RFC 8259 number, scanned here and written by append_canonical_number,
  // which refuses it when its ECMAScript form is not numerically equal to it.
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

    const std::size_t begin = pool_.size();
    std::string why;
    if (!append_canonical_number({negative, in_.substr(int_begin, int_end - int_begin),
                                  in_.substr(frac_begin, frac_end - frac_begin), exponent},
                                 pool_, &why))
      inexact(text, why);
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

}  // namespace idem::jcs
