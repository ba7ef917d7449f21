// Unit tests of the RFC 8785 canonicalizer. Every expected output is written
// out by hand (from the RFC where it has one), never computed by the code
// under test; non-ASCII expectations are spelled as UTF-8 bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../../src/pure/errors.hpp"
#include "../../src/pure/jcs.hpp"

namespace {

using idem::jcs::canonicalize;
using idem::jcs::ecmascript_number;

// The error canonicalize(json) throws; a test failure if it throws none.
idem::Error error_of(std::string_view json) {
  try {
    canonicalize(json);
  } catch (const idem::Error &e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << json.substr(0, 200);
  return idem::Error("00000", "no error");
}

std::string sqlstate_of(std::string_view json) { return error_of(json).sqlstate(); }

double from_bits(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// ---------------------------------------------------------------- RFC 8785

// Section 3.2.2's sample, except its first number: 333333333.33333329 is not
// the shortest form of its double, so idem refuses it (next test).
TEST(Rfc8785, SampleInput) {
  const char *input = R"({
  "numbers": [333333333.3333333, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
})";
  const std::string expected =
      R"({"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":")"
      "\xe2\x82\xac"
      R"($\u000f\nA'B\"\\\\\"/"})";
  EXPECT_EQ(canonicalize(input), expected);
}

TEST(Rfc8785, SampleAsPrintedHasAnInexactNumber) {
  const char *input = R"({
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
})";
  const idem::Error e = error_of(input);
  EXPECT_STREQ(e.sqlstate(), "P4005");
  EXPECT_NE(e.detail().find("333333333.3333333,"), std::string::npos) << e.detail();
}

// Section 3.2.3: names sorted as UTF-16 code units, so the emoji (a surrogate
// pair, 0xD83D...) sorts before U+FB33.
TEST(Rfc8785, SortingExample) {
  const char *input = R"({
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
})";
  const std::string expected =
      "{\"\\r\":\"Carriage Return\","
      "\"1\":\"One\","
      "\"\xc2\x80\":\"Control\","
      "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
      "\"\xe2\x82\xac\":\"Euro Sign\","
      "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
      "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}";
  EXPECT_EQ(canonicalize(input), expected);
}

struct AppendixB {
  std::uint64_t bits;
  const char *text;
};

// Appendix B, every finite row.
const AppendixB appendix_b[] = {
    {0x0000000000000000, "0"},
    {0x8000000000000000, "0"},
    {0x0000000000000001, "5e-324"},
    {0x8000000000000001, "-5e-324"},
    {0x7fefffffffffffff, "1.7976931348623157e+308"},
    {0xffefffffffffffff, "-1.7976931348623157e+308"},
    {0x4340000000000000, "9007199254740992"},
    {0xc340000000000000, "-9007199254740992"},
    {0x4430000000000000, "295147905179352830000"},
    {0x44b52d02c7e14af5, "9.999999999999997e+22"},
    {0x44b52d02c7e14af6, "1e+23"},
    {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
    {0x444b1ae4d6e2ef4e, "999999999999999700000"},
    {0x444b1ae4d6e2ef4f, "999999999999999900000"},
    {0x444b1ae4d6e2ef50, "1e+21"},
    {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
    {0x3eb0c6f7a0b5ed8d, "0.000001"},
    {0x41b3de4355555553, "333333333.3333332"},
    {0x41b3de4355555554, "333333333.33333325"},
    {0x41b3de4355555555, "333333333.3333333"},
    {0x41b3de4355555556, "333333333.3333334"},
    {0x41b3de4355555557, "333333333.33333343"},
    {0xbecbf647612f3696, "-0.0000033333333333333333"},
    {0x43143ff3c1cb0959, "1424953923781206.2"},
};

TEST(Rfc8785, AppendixBEcmascriptNumber) {
  for (const AppendixB &row : appendix_b)
    EXPECT_EQ(ecmascript_number(from_bits(row.bits)), row.text) << std::hex << row.bits;
}

// Each row's text is the exact ECMAScript form of a double, so it is
// accepted and left as it is.
TEST(Rfc8785, AppendixBTextsAreFixedPoints) {
  for (const AppendixB &row : appendix_b) {
    const std::string json = std::string("[") + row.text + "]";
    EXPECT_EQ(canonicalize(json), json);
  }
}

TEST(Rfc8785, AppendixBOtherSpellings) {
  EXPECT_EQ(canonicalize("-0"), "0");
  EXPECT_EQ(canonicalize("1.7976931348623157e308"), "1.7976931348623157e+308");
  EXPECT_EQ(canonicalize("-1.7976931348623157E+308"), "-1.7976931348623157e+308");
  EXPECT_EQ(canonicalize("5E-324"), "5e-324");
  EXPECT_EQ(canonicalize("90071992547409920e-1"), "9007199254740992");
  EXPECT_EQ(canonicalize("2.9514790517935283e20"), "295147905179352830000");
  EXPECT_EQ(canonicalize("1000000000000000000000"), "1e+21");
  EXPECT_EQ(canonicalize("1e-6"), "0.000001");
  EXPECT_EQ(canonicalize("-3.3333333333333333e-6"), "-0.0000033333333333333333");
}

TEST(Rfc8785, AppendixBNonFiniteIsAnError) {
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    try {
      ecmascript_number(v);
      ADD_FAILURE() << "no error for " << v;
    } catch (const idem::Error &e) {
      EXPECT_STREQ(e.sqlstate(), "P4099");
    }
  }
}


// ---------------------------------------------------------------- numbers

TEST(EcmascriptNumber, BriefExamples) {
  EXPECT_EQ(ecmascript_number(1e21), "1e+21");
  EXPECT_EQ(ecmascript_number(1.0), "1");
  EXPECT_EQ(ecmascript_number(-0.0), "0");
  EXPECT_EQ(ecmascript_number(1e-7), "1e-7");
  EXPECT_EQ(ecmascript_number(123e-20), "1.23e-18");
}

// The four layouts of Number::toString, at their edges.
TEST(EcmascriptNumber, LayoutBoundaries) {
  EXPECT_EQ(ecmascript_number(1e20), "100000000000000000000");
  EXPECT_EQ(ecmascript_number(123e18), "123000000000000000000");
  EXPECT_EQ(ecmascript_number(1.5e21), "1.5e+21");
  EXPECT_EQ(ecmascript_number(123.456), "123.456");
  EXPECT_EQ(ecmascript_number(-2.5), "-2.5");
  EXPECT_EQ(ecmascript_number(0.5), "0.5");
  EXPECT_EQ(ecmascript_number(1e-6), "0.000001");
  EXPECT_EQ(ecmascript_number(1.25e-6), "0.00000125");
  EXPECT_EQ(ecmascript_number(1.25e-7), "1.25e-7");
  EXPECT_EQ(ecmascript_number(-1e300), "-1e+300");
  EXPECT_EQ(ecmascript_number(0.1), "0.1");
  EXPECT_EQ(ecmascript_number(100), "100");
}

TEST(Numbers, SpellingsOfOne) {
  for (const char *one : {"1", "1.0", "1.000", "10e-1", "0.1e1", "1E0", "1e+0", "100e-2", "0.001e3"})
    EXPECT_EQ(canonicalize(one), "1") << one;
}

TEST(Numbers, SpellingsOfZero) {
  for (const char *zero : {"0", "-0", "0.0", "-0.0", "0e10", "0.000e-5", "-0E+400", "0e-99999999999999999999"})
    EXPECT_EQ(canonicalize(zero), "0") << zero;
}

TEST(Numbers, ExactValuesAccepted) {
  EXPECT_EQ(canonicalize("0.1"), "0.1");
  EXPECT_EQ(canonicalize("-0.1"), "-0.1");
  EXPECT_EQ(canonicalize("5e-324"), "5e-324");
  EXPECT_EQ(canonicalize("2.2250738585072014e-308"), "2.2250738585072014e-308");
  EXPECT_EQ(canonicalize("9007199254740992"), "9007199254740992");
  EXPECT_EQ(canonicalize("295147905179352830000"), "295147905179352830000");
  EXPECT_EQ(canonicalize("1e21"), "1e+21");
  EXPECT_EQ(canonicalize("0.000001"), "0.000001");
  EXPECT_EQ(canonicalize("1e-7"), "1e-7");
  EXPECT_EQ(canonicalize("333333333.3333333"), "333333333.3333333");
  EXPECT_EQ(canonicalize("123e-20"), "1.23e-18");
  EXPECT_EQ(canonicalize("19.99"), "19.99");
  EXPECT_EQ(canonicalize("-42"), "-42");
  EXPECT_EQ(canonicalize("1E+2"), "100");
}

TEST(Numbers, InexactRefused) {
  for (const char *n : {"12345678901234567890", "0.10000000000000000001", "9007199254740993",
                        "333333333.33333329", "1e400", "-1e400", "1e-400", "2e-324", "3e-324", "4.9e-324",
                        "1.7976931348623159e308", "1e99999999999999999999999", "1e-99999999999999999999",
                        "123456789012345678", "0.30000000000000001"}) {
    const idem::Error e = error_of(std::string("[") + n + "]");
    EXPECT_STREQ(e.sqlstate(), "P4005") << n;
    EXPECT_NE(e.message().find("cannot be represented exactly"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(n), std::string::npos) << e.message();
    EXPECT_NE(e.detail().find(n), std::string::npos) << e.detail();
    EXPECT_NE(e.hint().find("JSON string"), std::string::npos) << e.hint();
  }
}

TEST(Numbers, InexactDetailsSayWhy) {
  EXPECT_NE(error_of("9007199254740993").detail().find("9007199254740992"), std::string::npos);
  EXPECT_NE(error_of("1e400").detail().find("too large"), std::string::npos);
  EXPECT_NE(error_of("1e-400").detail().find("too small"), std::string::npos);
  EXPECT_NE(error_of("12345678901234567890").detail().find("19 significant digits"), std::string::npos);
  EXPECT_NE(error_of("123456789012345678").detail().find("18 significant digits"), std::string::npos);
}

TEST(Numbers, LongNumberIsAbbreviatedInMessages) {
  const std::string n = "1" + std::string(100000, '2');
  const idem::Error e = error_of(n);
  EXPECT_STREQ(e.sqlstate(), "P4005");
  EXPECT_LT(e.message().size(), 150u);
  EXPECT_LT(e.detail().size(), 300u);
  EXPECT_NE(e.message().find("1222222222"), std::string::npos);
  EXPECT_NE(e.message().find("100001 bytes"), std::string::npos) << e.message();
}

// Megabytes of digits cost linear time: significance is decided by counting,
// never by converting the whole text.
TEST(Numbers, MultiMegabyteDigitStrings) {
  const std::size_t n = 4'000'000;
  const auto start = std::chrono::steady_clock::now();
  // 0.000...0001 x 10^(n+1) is exactly 0.1 (n zeros after the point).
  EXPECT_EQ(canonicalize("0." + std::string(n, '0') + "1e" + std::to_string(n)), "0.1");
  EXPECT_EQ(canonicalize("1" + std::string(n, '0') + "e-" + std::to_string(n)), "1");
  EXPECT_EQ(canonicalize("-" + std::string(1, '0') + "." + std::string(n, '0')), "0");
  EXPECT_STREQ(error_of("1" + std::string(n, '0')).sqlstate(), "P4005");                // too large
  EXPECT_STREQ(error_of("0." + std::string(n, '0') + "1").sqlstate(), "P4005");         // too small
  EXPECT_STREQ(error_of("1." + std::string(n, '0') + "1").sqlstate(), "P4005");         // too many digits
  EXPECT_STREQ(error_of("[" + std::string(n, '7') + "]").sqlstate(), "P4005");          // too many digits
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
}

TEST(Numbers, InvalidSyntax) {
  for (const char *n : {"01", "-01", "-", "1.", ".5", "+1", "1e", "1e+", "1E-", "--1", "0x10", "Infinity",
                        "-Infinity", "NaN", "1.e5", "1..2", "1e5.5", "- 1", "00"})
    EXPECT_EQ(sqlstate_of(n), "22P02") << n;
}

// ---------------------------------------------------------------- strings

TEST(Strings, ShortEscapes) {
  EXPECT_EQ(canonicalize(R"("\"\\\/\b\f\n\r\t")"), R"("\"\\/\b\f\n\r\t")");
}

TEST(Strings, OtherControlCharactersAsLowercaseUEscapes) {
  EXPECT_EQ(canonicalize(R"("\u0000\u0001\u001F\u001f\u000B\u000E")"),
            R"("\u0000\u0001\u001f\u001f\u000b\u000e")");
  // The named ones, spelled as \u, come out in their short form.
  EXPECT_EQ(canonicalize(R"("\u0008\u0009\u000A\u000c\u000D\u0022\u005C\u002F")"), R"("\b\t\n\f\r\"\\/")");
}

TEST(Strings, EverythingElseIsRawUtf8) {
  // U+007F, é, €, U+2028, U+FFFF, U+1F600, U+10FFFF.
  EXPECT_EQ(canonicalize(R"("\u007f\u00E9\u20ac\u2028\uffff\uD83D\uDE00\udbff\udfff\u0041")"),
            "\"\x7f\xc3\xa9\xe2\x82\xac\xe2\x80\xa8\xef\xbf\xbf\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"
            "A\"");
  // Raw UTF-8 input passes through unchanged.
  const std::string raw = "\"\x7f\xc3\xa9\xe2\x82\xac\xe2\x80\xa8\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"";
  EXPECT_EQ(canonicalize(raw), raw);
}

TEST(Strings, InvalidEscapes) {
  for (const char *s : {R"("\x")", R"("\u12")", R"("\u12G4")", R"("\U0041")", R"("\'")", R"("\)", R"("\u")",
                        R"("\a")", R"("\0")"})
    EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

TEST(Strings, LoneSurrogates) {
  for (const char *s : {R"("\ud800")", R"("\udc00")", R"("\ud800\u0041")", R"("\ud800x")", R"("\udbff\udbff")",
                        R"("\ude00\ud83d")", R"("\ud83d\n")", R"(["\ud800"])", R"({"\udfff":1})"})
    EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

TEST(Strings, InvalidUtf8) {
  const char *bad[] = {
      "\"\xff\"",              // never valid
      "\"\x80\"",              // lone continuation byte
      "\"\xc0\xaf\"",          // overlong '/'
      "\"\xc1\xbf\"",          // overlong
      "\"\xe0\x80\xaf\"",      // overlong
      "\"\xf0\x80\x80\xaf\"",  // overlong
      "\"\xed\xa0\x80\"",      // UTF-8-encoded surrogate U+D800
      "\"\xf4\x90\x80\x80\"",  // U+110000
      "\"\xf5\x80\x80\x80\"",  // beyond Unicode
      "\"\xc3\"",              // truncated before the quote
      "\"\xe2\x82\"",          // truncated
      "\"\xc3",                // truncated at end of input
      "\xc3\xa9",              // non-ASCII outside a string
  };
  for (const char *s : bad) EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

TEST(Strings, RawControlCharactersRefused) {
  EXPECT_EQ(sqlstate_of("\"a\nb\""), "22P02");
  EXPECT_EQ(sqlstate_of("\"\t\""), "22P02");
  EXPECT_EQ(sqlstate_of("\"\x1f\""), "22P02");
  EXPECT_EQ(sqlstate_of(std::string("\"\0\"", 3)), "22P02");
  EXPECT_NE(error_of("\"\x01\"").message().find("control character U+0001"), std::string::npos);
}

TEST(Strings, Unterminated) {
  for (const char *s : {"\"", "\"abc", "[\"abc]", "{\"a", "\"\\\""}) EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

// ---------------------------------------------------------------- structure

TEST(Structure, ScalarsAtTopLevel) {
  EXPECT_EQ(canonicalize("true"), "true");
  EXPECT_EQ(canonicalize(" false "), "false");
  EXPECT_EQ(canonicalize("\nnull\t"), "null");
  EXPECT_EQ(canonicalize("\"x\""), "\"x\"");
  EXPECT_EQ(canonicalize(" 7 "), "7");
}

TEST(Structure, EmptyContainers) {
  EXPECT_EQ(canonicalize("[ ]"), "[]");
  EXPECT_EQ(canonicalize("{ }"), "{}");
  EXPECT_EQ(canonicalize("[[],{}]"), "[[],{}]");
  EXPECT_EQ(canonicalize(R"({"":{}, " ":[]})"), R"({"":{}," ":[]})");
}

TEST(Structure, InvalidDocuments) {
  for (const char *s : {"", "   ", "[", "]", "{", "}", "[1,]", "[,1]", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}",
                        "{\"a\":1,}", "{\"a\":1 \"b\":2}", "{,}", "[1]x", "[1]]", "{\"a\":1}}", "{'a':1}",
                        "/* c */ 1", "\xef\xbb\xbf[1]", "tru", "nul", "True", "nulll", "[true false]", "\v1",
                        "\f1", "{\"a\" 1}", "{1:2}", "[1;2]"})
    EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

TEST(Structure, NulByteIsNotEndOfInput) {
  EXPECT_EQ(sqlstate_of(std::string("[1]\0", 4)), "22P02");
  EXPECT_EQ(sqlstate_of(std::string("[1\0]", 4)), "22P02");
}

TEST(Structure, WhitespaceInsensitive) {
  const std::string expected = R"({"a":{},"b":[1,2,{"c":null}]})";
  for (const char *s : {R"({"a":{},"b":[1,2,{"c":null}]})",
                        "  {\n\t\"b\" : [ 1 , 2 , { \"c\" : null } ] ,\r\n \"a\" : { } }  ",
                        "{\"a\"\n:\n{\n}\n,\n\"b\"\n:\n[\n1\n,\n2.0\n,\n{\"c\":null}\n]\n}\n"})
    EXPECT_EQ(canonicalize(s), expected) << s;
}

TEST(Structure, KeyOrderInsensitive) {
  const std::string expected = R"({"a":2,"b":1,"c":{"y":[{"p":2,"q":1}],"z":1}})";
  for (const char *s : {R"({"b":1,"a":2,"c":{"z":1,"y":[{"q":1,"p":2}]}})",
                        R"({"c":{"y":[{"p":2,"q":1}],"z":1},"b":1,"a":2})",
                        R"({"a":2,"c":{"z":1,"y":[{"p":2,"q":1}]},"b":1})"})
    EXPECT_EQ(canonicalize(s), expected) << s;
}

TEST(Structure, ArrayOrderIsKept) {
  EXPECT_EQ(canonicalize("[3,1,2]"), "[3,1,2]");
}

// Names compare as UTF-16 code units: U+10000 (0xD800 0xDC00) sorts before
// U+E000, the reverse of code point (and UTF-8 byte) order; a prefix first.
TEST(Sorting, Utf16CodeUnitOrder) {
  EXPECT_EQ(canonicalize(R"({"\ue000":1,"\ud800\udc00":2})"),
            "{\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":1}");
  EXPECT_EQ(canonicalize(R"({"ab":1,"b":2,"a":3,"":4,"aa":5,"B":6})"), R"({"":4,"B":6,"a":3,"aa":5,"ab":1,"b":2})");
  // Names are compared unescaped: "\u0062" is "b".
  EXPECT_EQ(canonicalize(R"({"\u0062":1,"a\"":2,"a":3})"), R"({"a":3,"a\"":2,"b":1})");
}

TEST(Duplicates, Refused) {
  for (const char *s : {R"({"a":1,"a":2})", R"({"a":1,"\u0061":2})", R"({"a":1,"b":2,"a":1})",
                        R"([{"x":{"y":1,"y":1}}])", "{\"\xc3\xa9\":1,\"\\u00e9\":2}",
                        R"({"\ud83d\ude00":1,"\uD83D\uDE00":2})"})
    EXPECT_EQ(sqlstate_of(s), "22P02") << s;
}

TEST(Duplicates, DetailNamesTheMember) {
  const idem::Error e = error_of(R"({"amount":1,"amount":2})");
  EXPECT_NE(e.message().find("duplicate"), std::string::npos) << e.message();
  EXPECT_NE(e.detail().find("\"amount\""), std::string::npos) << e.detail();
  // A long name is abbreviated.
  const std::string name(10000, 'n');
  const idem::Error e2 = error_of("{\"" + name + "\":1,\"" + name + "\":1}");
  EXPECT_LT(e2.detail().size(), 200u);
}

TEST(Duplicates, SameNameInDifferentObjectsIsFine) {
  EXPECT_EQ(canonicalize(R"({"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]})"),
            R"({"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]})");
}

// ---------------------------------------------------------------- depth

TEST(Depth, MaxDepthArraysAccepted) {
  ASSERT_EQ(idem::jcs::max_depth, 1000);
  const std::string doc = repeat("[", 1000) + repeat("]", 1000);
  EXPECT_EQ(canonicalize(doc), doc);
}

TEST(Depth, MaxDepthObjectsAccepted) {
  const std::string doc = repeat("{\"k\":", 999) + "{}" + repeat("}", 999);
  EXPECT_EQ(canonicalize(doc), doc);
  const std::string mixed = repeat("[{\"k\":", 500) + "1" + repeat("}]", 500);
  EXPECT_EQ(canonicalize(mixed), mixed);
}

TEST(Depth, OneLevelMoreRefused) {
  EXPECT_EQ(sqlstate_of(repeat("[", 1001) + repeat("]", 1001)), "54001");
  EXPECT_EQ(sqlstate_of(repeat("{\"k\":", 1000) + "{}" + repeat("}", 1000)), "54001");
  const idem::Error e = error_of(repeat("[", 1001) + repeat("]", 1001));
  EXPECT_NE(e.detail().find("1000"), std::string::npos) << e.detail();
  EXPECT_FALSE(e.hint().empty());
}

TEST(Depth, HugeNestingNeverOverflowsTheStack) {
  EXPECT_EQ(sqlstate_of(repeat("[", 5'000'000)), "54001");
  EXPECT_EQ(sqlstate_of(repeat("{\"\":", 1'000'000)), "54001");
}

// ---------------------------------------------------------------- errors and size

TEST(Errors, EveryKindCarriesSqlstateDetailAndHint) {
  for (const char *s : {"[1,]", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "1e400"}) {
    const idem::Error e = error_of(s);
    EXPECT_FALSE(e.message().empty()) << s;
    EXPECT_FALSE(e.detail().empty()) << s;
    EXPECT_FALSE(e.hint().empty()) << s;
  }
  EXPECT_STREQ(error_of("[1,]").sqlstate(), "22P02");
  EXPECT_NE(error_of("[1,]").detail().find("byte offset 3"), std::string::npos);
  EXPECT_STREQ(error_of("1e400").sqlstate(), "P4005");
  EXPECT_STREQ(error_of(repeat("[", 1001)).sqlstate(), "54001");
}

TEST(Size, MultiMegabyteDocument) {
  const std::size_t n = 100'000;  // about 3.5 MB in, 2.6 MB out
  const std::string input = "[" + repeat("{ \"b\" : 1.50, \"a\" : \"x\\u0041\" },", n) + "null]";
  const std::string expected = "[" + repeat("{\"a\":\"xA\",\"b\":1.5},", n) + "null]";
  EXPECT_EQ(canonicalize(input), expected);
  // 200000 members written in descending order come out ascending.
  std::string wide = "{", wide_expected = "{";
  for (int i = 0; i < 200'000; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "\"k%06d\"", 199'999 - i);
    wide += std::string(i ? ", " : "") + name + " : " + std::to_string(i);
    std::snprintf(name, sizeof name, "\"k%06d\"", i);
    wide_expected += std::string(i ? "," : "") + name + ":" + std::to_string(199'999 - i);
  }
  EXPECT_EQ(canonicalize(wide + "}"), wide_expected + "}");
  const std::string big_string = "\"" + std::string(5'000'000, 'q') + "\"";
  EXPECT_EQ(canonicalize(big_string), big_string);
}

TEST(Idempotence, CanonicalFormIsAFixedPoint) {
  for (const char *s : {R"({"b":[1.0,2e3,{"y":"\u00e9","x":"\u0007"}],"a":-0})",
                        R"(["\ud83d\ude00",1e-7,1e21,0.000001,true])"}) {
    const std::string once = canonicalize(s);
    EXPECT_EQ(canonicalize(once), once);
  }
}

}  // namespace
