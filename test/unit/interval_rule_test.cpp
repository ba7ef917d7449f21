// Unit tests of the one interval rule (src/pure/interval_rule.hpp). Each
// expectation is worked out by hand from the calendar, not by the code.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "../../src/pure/interval_rule.hpp"

namespace {

using idem::interval_rule::is_not_negative;
using idem::interval_rule::is_positive;

constexpr std::int64_t hour = std::int64_t{3600} * 1000000;

TEST(IntervalRule, PlainPositiveValues) {
  EXPECT_TRUE(is_positive(0, 0, 1));
  EXPECT_TRUE(is_positive(0, 1, 0));
  EXPECT_TRUE(is_positive(1, 0, 0));
  EXPECT_TRUE(is_positive(12, 0, 0));
}

TEST(IntervalRule, ZeroAndNegativeValues) {
  EXPECT_FALSE(is_positive(0, 0, 0));
  EXPECT_TRUE(is_not_negative(0, 0, 0));
  EXPECT_FALSE(is_positive(0, 0, -1));
  EXPECT_FALSE(is_not_negative(0, 0, -1));
  EXPECT_FALSE(is_positive(-1, 0, 0));
  EXPECT_FALSE(is_positive(0, -1, 0));
}

// A month subtracted can be 31 days: '-1 mon 31 days' from a day after a
// 31-day month is no time at all, '-1 mon 30 days 1 hour' is 23 hours back.
TEST(IntervalRule, MonthsSubtractedCountAsLongMonths) {
  EXPECT_FALSE(is_positive(-1, 31, 0));
  EXPECT_FALSE(is_positive(-1, 30, hour));
  EXPECT_FALSE(is_positive(-1, 28, 0));
  EXPECT_TRUE(is_positive(-1, 32, 0));
}

// A month added can be 28 days (January 31 plus a month is February 28).
TEST(IntervalRule, MonthsAddedCountAsShortMonths) {
  EXPECT_TRUE(is_positive(1, -27, 0));
  EXPECT_FALSE(is_positive(1, -28, 0));
  EXPECT_TRUE(is_not_negative(1, -28, 0));
  EXPECT_FALSE(is_positive(1, -31, 0));
}

// A day may be 23 hours (a daylight-saving change) when it moves the date.
TEST(IntervalRule, DaysAllowForDaylightSaving) {
  EXPECT_TRUE(is_positive(0, 1, -22 * hour));
  EXPECT_FALSE(is_positive(0, 1, -23 * hour));
  EXPECT_TRUE(is_not_negative(0, 1, -23 * hour));
  EXPECT_FALSE(is_positive(0, -1, 25 * hour));
  EXPECT_TRUE(is_positive(0, -1, 25 * hour + 1));
}

TEST(IntervalRule, ExtremeFieldsDoNotOverflow) {
  constexpr auto max32 = std::numeric_limits<std::int32_t>::max();
  constexpr auto min32 = std::numeric_limits<std::int32_t>::min();
  constexpr auto max64 = std::numeric_limits<std::int64_t>::max();
  constexpr auto min64 = std::numeric_limits<std::int64_t>::min();
  EXPECT_TRUE(is_positive(max32, max32, max64));
  EXPECT_FALSE(is_positive(min32, min32, min64));
  EXPECT_FALSE(is_positive(min32, 0, max64));
  EXPECT_TRUE(is_positive(max32, 0, min64));
}

}  // namespace
