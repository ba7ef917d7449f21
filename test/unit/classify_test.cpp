// docs/design.md's order of precedence for a claim, as a table: every status,
// with and without a matching hash, an expired lock and a passed expiry.
#include <gtest/gtest.h>

#include "../../src/pure/classify.hpp"

namespace {

using idem::Action;
using idem::ClaimKind;
using idem::ObservedRow;
using idem::Status;

ObservedRow row(Status status, bool same_hash, bool lock_expired, bool expired) {
  ObservedRow r;
  r.exists = true;
  r.status = status;
  r.same_request_hash = same_hash;
  r.lock_expired = lock_expired;
  r.expired = expired;
  return r;
}

TEST(Classify, NoRowIsANewClaim) {
  EXPECT_EQ(idem::classify(ObservedRow{}), Action::insert);
  EXPECT_EQ(idem::claim_kind_of(Action::insert), ClaimKind::new_claim);
}

TEST(Classify, LiveRowsByStatus) {
  EXPECT_EQ(idem::classify(row(Status::succeeded, true, false, false)), Action::replay_success);
  EXPECT_EQ(idem::classify(row(Status::failed_final, true, false, false)), Action::replay_failure);
  EXPECT_EQ(idem::classify(row(Status::failed_retryable, true, false, false)),
            Action::take_over_failed);
  EXPECT_EQ(idem::classify(row(Status::processing, true, false, false)), Action::report_active);
  EXPECT_EQ(idem::classify(row(Status::processing, true, true, false)), Action::take_over_stale);
}

TEST(Classify, MismatchComesBeforeEveryLiveStatus) {
  for (Status s : {Status::succeeded, Status::failed_final, Status::failed_retryable}) {
    EXPECT_EQ(idem::classify(row(s, false, false, false)), Action::reject_mismatch);
  }
  // A processing row is checked too, whether its lock holds or not, and even
  // past its expiry: in-flight rows never expire for claims.
  EXPECT_EQ(idem::classify(row(Status::processing, false, false, false)), Action::reject_mismatch);
  EXPECT_EQ(idem::classify(row(Status::processing, false, true, false)), Action::reject_mismatch);
  EXPECT_EQ(idem::classify(row(Status::processing, false, true, true)), Action::reject_mismatch);
}

TEST(Classify, ExpiredFinishedRowsBehaveAsPurged) {
  for (Status s : {Status::succeeded, Status::failed_final, Status::failed_retryable}) {
    EXPECT_EQ(idem::classify(row(s, true, false, true)), Action::regenerate);
    // ...so a different request hash is accepted for the new generation.
    EXPECT_EQ(idem::classify(row(s, false, false, true)), Action::regenerate);
  }
  EXPECT_EQ(idem::claim_kind_of(Action::regenerate), ClaimKind::new_claim);
}

TEST(Classify, ExpiredProcessingRowsStayOwned) {
  EXPECT_EQ(idem::classify(row(Status::processing, true, false, true)), Action::report_active);
  EXPECT_EQ(idem::classify(row(Status::processing, true, true, true)), Action::take_over_stale);
}

TEST(Classify, KindsOfActions) {
  EXPECT_EQ(idem::claim_kind_of(Action::replay_success), ClaimKind::replay_success);
  EXPECT_EQ(idem::claim_kind_of(Action::replay_failure), ClaimKind::final_failure);
  EXPECT_EQ(idem::claim_kind_of(Action::report_active), ClaimKind::processing_active);
  EXPECT_EQ(idem::claim_kind_of(Action::take_over_stale), ClaimKind::processing_stale);
  EXPECT_EQ(idem::claim_kind_of(Action::take_over_failed), ClaimKind::retryable_failure);
}

// The names must match the SQL enums label for label (idem--1.0.sql).
TEST(Classify, NamesMatchTheSqlEnums) {
  const char *kinds[] = {"new_claim",        "replay_success",    "processing_active",
                         "processing_stale", "retryable_failure", "final_failure"};
  for (int i = 0; i < 6; ++i)
    EXPECT_STREQ(idem::claim_kind_name(static_cast<ClaimKind>(i)), kinds[i]);
  const char *statuses[] = {"processing", "succeeded", "failed_retryable", "failed_final"};
  for (int i = 0; i < 4; ++i) {
    Status parsed;
    ASSERT_TRUE(idem::parse_status(statuses[i], &parsed)) << statuses[i];
    EXPECT_EQ(static_cast<int>(parsed), i);
    EXPECT_STREQ(idem::status_name(parsed), statuses[i]);
  }
  Status untouched = Status::succeeded;
  EXPECT_FALSE(idem::parse_status("finished", &untouched));
  EXPECT_FALSE(idem::parse_status("", &untouched));
  EXPECT_EQ(untouched, Status::succeeded);
}

}  // namespace
