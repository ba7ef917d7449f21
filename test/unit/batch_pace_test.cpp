// Unit tests of the worker's pause after a full batch (src/pure/batch_pace.hpp).
#include <gtest/gtest.h>

#include <climits>

#include "../../src/pure/batch_pace.hpp"

namespace {

using idem::batch_pace::pause_after_full_batch_ms;
using idem::batch_pace::paced_full_batches;

TEST(BatchPace, TheFirstFullBatchGetsTheWholeDelay) {
  EXPECT_EQ(pause_after_full_batch_ms(2000, 1), 2000);
  EXPECT_EQ(pause_after_full_batch_ms(60000, 1), 60000);
  EXPECT_EQ(pause_after_full_batch_ms(1, 1), 1);
}

TEST(BatchPace, EachFurtherFullBatchHalvesIt) {
  EXPECT_EQ(pause_after_full_batch_ms(2000, 2), 1000);
  EXPECT_EQ(pause_after_full_batch_ms(2000, 3), 500);
  EXPECT_EQ(pause_after_full_batch_ms(2000, 4), 250);
  EXPECT_EQ(pause_after_full_batch_ms(300, 2), 150);
  EXPECT_EQ(pause_after_full_batch_ms(300, 4), 37);
}

TEST(BatchPace, ALargeBacklogGoesFlatOut) {
  EXPECT_EQ(paced_full_batches, 4);
  EXPECT_EQ(pause_after_full_batch_ms(2000, 5), 0);
  EXPECT_EQ(pause_after_full_batch_ms(60000, 100), 0);
  EXPECT_EQ(pause_after_full_batch_ms(60000, INT_MAX), 0);
}

TEST(BatchPace, NeverMoreThanTheDelayNorBelowZero) {
  for (int delay : {0, 1, 7, 300, 2000, 60000, INT_MAX})
    for (int k = -1; k < 10; ++k) {
      int pause = pause_after_full_batch_ms(delay, k);
      EXPECT_GE(pause, 0);
      EXPECT_LE(pause, delay < 0 ? 0 : delay);
    }
}

TEST(BatchPace, NoDelayMeansNoPause) {
  EXPECT_EQ(pause_after_full_batch_ms(0, 1), 0);
  EXPECT_EQ(pause_after_full_batch_ms(-5, 1), 0);
  EXPECT_EQ(pause_after_full_batch_ms(2000, 0), 0);
}

}  // namespace
