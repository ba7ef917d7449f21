// Unit tests of idem::Error as the pure C++ code throws it: the message is
// a format with its arguments (what errmsg receives in the guard), its text
// is the format filled in, and the error knows the place that threw it
// (the LOCATION the guard reports).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "../../src/pure/errors.hpp"
#include "../../src/pure/jcs.hpp"

namespace {

using idem::Error;
using idem::Message;

TEST(Message, WithoutArgumentsIsItsFormat) {
  const Message m("JSON value nested too deeply");
  EXPECT_STREQ(m.format(), "JSON value nested too deeply");
  EXPECT_EQ(m.argument_count(), 0);
  EXPECT_EQ(m.text(), "JSON value nested too deeply");
}

TEST(Message, ArgumentsFillTheirPlacesVerbatim) {
  // An argument is text, never a format: its own % and %s stay as sent.
  const Message m("number %s cannot be represented exactly as %s", "1%s2", "a 100% double");
  EXPECT_EQ(m.argument_count(), 2);
  EXPECT_EQ(m.text(), "number 1%s2 cannot be represented exactly as a 100% double");
}

TEST(Message, PercentPercentIsOnePercent) {
  EXPECT_EQ(Message("100%% of %s", "it").text(), "100% of it");
}

int throwing_line = 0;

[[noreturn]] void throw_here() {
  throwing_line = __LINE__ + 1;
  throw Error(idem::sqlstate::internal, Message("broken rule \"%s\"", "r"), "detail", "hint");
}

TEST(Error, KnowsWhereItWasThrown) {
  try {
    throw_here();
  } catch (const Error &e) {
    EXPECT_STREQ(e.sqlstate(), "P4099");
    EXPECT_EQ(e.message(), "broken rule \"r\"");
    EXPECT_STREQ(e.what(), "broken rule \"r\"");
    EXPECT_STREQ(e.message_format().format(), "broken rule \"%s\"");
    EXPECT_NE(std::strstr(e.where().file, "errors_test.cpp"), nullptr) << e.where().file;
    EXPECT_EQ(e.where().line, throwing_line);
    EXPECT_STREQ(e.where().function, "throw_here");
    return;
  }
  FAIL() << "no error";
}

TEST(Error, FromTheCanonicalizerNamesJcs) {
  try {
    (void)idem::jcs::canonicalize("[1,");
  } catch (const Error &e) {
    EXPECT_STREQ(e.message_format().format(), "invalid JSON: %s");
    EXPECT_EQ(e.message().rfind("invalid JSON: ", 0), 0u) << e.message();
    EXPECT_NE(std::strstr(e.where().file, "jcs.cpp"), nullptr) << e.where().file;
    EXPECT_GT(e.where().line, 0);
    return;
  }
  FAIL() << "no error";
}

}  // namespace
