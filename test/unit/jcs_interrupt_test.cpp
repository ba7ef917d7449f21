// The canonicalizer stops when its caller says an interrupt is pending
// (src/pure/jcs.hpp), so idem.request_hash on a large document can be cancelled.
#include <gtest/gtest.h>

#include <string>

#include "../../src/pure/jcs.hpp"

namespace {

int asked = 0;
int stop_after = 0;

bool pending_after_some_asks() { return ++asked > stop_after; }
bool never_pending() {
  ++asked;
  return false;
}

std::string large_array(int n) {
  std::string json = "[";
  for (int i = 0; i < n; ++i) json += (i ? ",{\"b\":" : "{\"b\":") + std::to_string(i) + ",\"a\":true}";
  return json + "]";
}

TEST(JcsInterrupt, StopsWhenAnInterruptIsPending) {
  asked = 0;
  stop_after = 3;
  EXPECT_THROW(idem::jcs::canonicalize(large_array(100000), pending_after_some_asks),
               idem::jcs::Interrupted);
  EXPECT_EQ(asked, 4) << "asked until told to stop, then stopped";
}

TEST(JcsInterrupt, AsksNowAndThenAndGivesTheSameAnswer) {
  asked = 0;
  const std::string json = large_array(100000);
  EXPECT_EQ(idem::jcs::canonicalize(json, never_pending), idem::jcs::canonicalize(json));
  // 300,001 values parsed, 500,001 items written (names included): asked
  // once per 1024 of them.
  EXPECT_EQ(asked, (300001 + 500001) / 1024);
}

TEST(JcsInterrupt, SmallDocumentsNeverAsk) {
  asked = 0;
  EXPECT_EQ(idem::jcs::canonicalize("{\"b\":1,\"a\":[1,2]}", never_pending), "{\"a\":[1,2],\"b\":1}");
  EXPECT_EQ(asked, 0);
}

}  // namespace
