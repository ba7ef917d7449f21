// The key table's invariants (src/pure/row_invariants.cpp): the rows idem's own
// functions write hold them all; each of 1.0's thirteen rules, broken alone,
// is the one reported, with its 1.0 constraint name and SQLSTATE 23514; the
// boundaries of each rule; NULLs judged as SQL's CHECK judges them.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../../src/pure/errors.hpp"
#include "../../src/pure/row_invariants.hpp"

namespace {

using idem::Invariant;
using idem::RequestRow;
using idem::Status;

constexpr std::int64_t hour = 3600LL * 1000000;  // timestamptz microseconds
constexpr std::int64_t infinity = std::numeric_limits<std::int64_t>::max();

// A row as claim_idempotency_key inserts it.
RequestRow processing_row() {
  RequestRow row;
  row.scope_chars = 6;
  row.key_chars = 3;
  row.request_hash_bytes = 64;
  row.status = Status::processing;
  row.recovery_point = "started";
  row.fence = 1;
  row.attempt_count = 1;
  row.has_locked_until = true;
  row.created_at = 1000 * hour;
  row.expires_at = 1024 * hour;
  return row;
}

// A row as mark_succeeded leaves it.
RequestRow succeeded_row() {
  RequestRow row = processing_row();
  row.status = Status::succeeded;
  row.recovery_point = "finished";
  row.has_locked_until = false;
  row.has_finished_at = true;
  row.response_code = 201;
  row.has_response_body = true;
  return row;
}

// A row as mark_failed (or sweep_stale, with 'abandoned' or 'expired') leaves it.
RequestRow failed_row(Status status, const char *failure_code) {
  RequestRow row = processing_row();
  row.status = status;
  row.recovery_point = "charged";
  row.has_locked_until = false;
  row.has_finished_at = true;
  row.failure_code = failure_code;
  row.has_failure_message = true;
  return row;
}

// The SQLSTATE, message, detail and hint require_invariants() throws.
idem::Error error_of(const RequestRow &row) {
  try {
    idem::require_invariants(row);
  } catch (const idem::Error &e) {
    return e;
  }
  ADD_FAILURE() << "the row was accepted";
  return idem::Error("00000", "");
}

std::string broken_name(const RequestRow &row) {
  std::optional<Invariant> broken = idem::first_broken_invariant(row);
  return broken ? idem::text_of(*broken).name : "(none)";
}

TEST(RowInvariants, RowsIdemWritesHoldThemAll) {
  RequestRow rows[] = {
      processing_row(),
      succeeded_row(),
      failed_row(Status::failed_retryable, "card_declined"),
      failed_row(Status::failed_retryable, "abandoned"),
      failed_row(Status::failed_final, "expired"),
  };
  for (const RequestRow &row : rows) {
    EXPECT_EQ(broken_name(row), "(none)");
    EXPECT_NO_THROW(idem::require_invariants(row));
  }
  // A final failure may carry the response the API answered with.
  RequestRow failed_with_response = failed_row(Status::failed_final, "card_declined");
  failed_with_response.response_code = 402;
  failed_with_response.has_response_body = true;
  EXPECT_EQ(broken_name(failed_with_response), "(none)");
  // A key that never expires.
  RequestRow forever = succeeded_row();
  forever.expires_at = infinity;
  EXPECT_EQ(broken_name(forever), "(none)");
}

// The names are 1.0's constraint names, in 1.0's order (sql/idem--1.0.sql).
TEST(RowInvariants, NamesAreThoseOfTheOneDotZeroConstraints) {
  const char *names[idem::invariant_count] = {
      "scope_length",           "key_length",
      "request_hash_present",   "fence_positive",
      "attempt_count_positive", "recovery_point_present",
      "response_code_is_http_status", "expires_after_creation",
      "finished_means_succeeded", "processing_is_locked_and_open",
      "outcome_is_unlocked_and_dated", "success_has_response",
      "failure_has_code"};
  for (int i = 0; i < idem::invariant_count; ++i) {
    const idem::InvariantText &text = idem::text_of(static_cast<Invariant>(i));
    EXPECT_STREQ(text.name, names[i]);
    EXPECT_GT(std::string(text.rule).size(), 10u) << names[i];
    EXPECT_GT(std::string(text.hint).size(), 10u) << names[i];
  }
}

// Each rule broken alone, starting from a row that holds them all.
struct Breakage {
  const char *expected;
  RequestRow row;
};

std::vector<Breakage> single_breakages() {
  std::vector<Breakage> cases;
  auto add = [&cases](const char *expected, RequestRow row) { cases.push_back({expected, row}); };
  RequestRow r;
  r = processing_row(); r.scope_chars = 0; add("scope_length", r);
  r = processing_row(); r.scope_chars = 256; add("scope_length", r);
  r = processing_row(); r.key_chars = 0; add("key_length", r);
  r = processing_row(); r.key_chars = 256; add("key_length", r);
  r = processing_row(); r.request_hash_bytes = 0; add("request_hash_present", r);
  r = processing_row(); r.fence = 0; add("fence_positive", r);
  r = processing_row(); r.fence = -7; add("fence_positive", r);
  r = processing_row(); r.attempt_count = 0; add("attempt_count_positive", r);
  r = processing_row(); r.recovery_point = ""; add("recovery_point_present", r);
  r = succeeded_row(); r.response_code = 99; add("response_code_is_http_status", r);
  r = succeeded_row(); r.response_code = 600; add("response_code_is_http_status", r);
  r = processing_row(); r.expires_at = *r.created_at; add("expires_after_creation", r);
  r = processing_row(); r.expires_at = *r.created_at - 1; add("expires_after_creation", r);
  r = processing_row(); r.recovery_point = "finished"; add("finished_means_succeeded", r);
  r = succeeded_row(); r.recovery_point = "charged"; add("finished_means_succeeded", r);
  r = failed_row(Status::failed_final, "x"); r.recovery_point = "finished";
  add("finished_means_succeeded", r);
  r = processing_row(); r.has_locked_until = false; add("processing_is_locked_and_open", r);
  r = processing_row(); r.has_finished_at = true; add("processing_is_locked_and_open", r);
  r = processing_row(); r.response_code = 200; add("processing_is_locked_and_open", r);
  r = processing_row(); r.has_response_body = true; add("processing_is_locked_and_open", r);
  r = succeeded_row(); r.has_locked_until = true; add("outcome_is_unlocked_and_dated", r);
  r = succeeded_row(); r.has_finished_at = false; add("outcome_is_unlocked_and_dated", r);
  r = failed_row(Status::failed_retryable, "x"); r.has_locked_until = true;
  add("outcome_is_unlocked_and_dated", r);
  r = failed_row(Status::failed_final, "x"); r.has_finished_at = false;
  add("outcome_is_unlocked_and_dated", r);
  r = succeeded_row(); r.response_code.reset(); add("success_has_response", r);
  r = succeeded_row(); r.failure_code = "x"; add("success_has_response", r);
  r = succeeded_row(); r.has_failure_message = true; add("success_has_response", r);
  r = failed_row(Status::failed_retryable, "x"); r.failure_code.reset(); add("failure_has_code", r);
  r = failed_row(Status::failed_final, "x"); r.failure_code = ""; add("failure_has_code", r);
  return cases;
}

TEST(RowInvariants, EachRuleBrokenAloneIsTheOneReported) {
  std::vector<Breakage> cases = single_breakages();
  bool seen[idem::invariant_count] = {};
  for (const Breakage &c : cases) {
    EXPECT_EQ(broken_name(c.row), c.expected);
    idem::Error e = error_of(c.row);
    EXPECT_STREQ(e.sqlstate(), "23514") << c.expected;
    EXPECT_EQ(e.message(), std::string("new row violates idem invariant \"") + c.expected + "\"");
    std::optional<Invariant> broken = idem::first_broken_invariant(c.row);
    ASSERT_TRUE(broken.has_value());
    EXPECT_EQ(e.detail(), idem::text_of(*broken).rule);
    EXPECT_EQ(e.hint(), idem::text_of(*broken).hint);
    seen[static_cast<int>(*broken)] = true;
    // holds() agrees: exactly this one rule is broken.
    for (int i = 0; i < idem::invariant_count; ++i) {
      auto invariant = static_cast<Invariant>(i);
      EXPECT_EQ(idem::holds(invariant, c.row), invariant != *broken)
          << c.expected << " vs " << idem::text_of(invariant).name;
    }
  }
  for (int i = 0; i < idem::invariant_count; ++i)
    EXPECT_TRUE(seen[i]) << idem::text_of(static_cast<Invariant>(i)).name << " never broken";
}

TEST(RowInvariants, BoundariesThatHold) {
  RequestRow r = processing_row();
  r.scope_chars = 1;
  r.key_chars = 255;
  r.fence = std::numeric_limits<std::int64_t>::max();
  r.expires_at = *r.created_at + 1;
  EXPECT_EQ(broken_name(r), "(none)");
  r.scope_chars = 255;
  r.key_chars = 1;
  EXPECT_EQ(broken_name(r), "(none)");
  RequestRow s = succeeded_row();
  s.response_code = 100;
  EXPECT_EQ(broken_name(s), "(none)");
  s.response_code = 599;
  EXPECT_EQ(broken_name(s), "(none)");
  // A retryable failure may keep a non-'finished' checkpoint of any name,
  // and a failure_message is optional.
  RequestRow f = failed_row(Status::failed_retryable, "x");
  f.has_failure_message = false;
  f.recovery_point = "finished-payment";  // not 'finished'
  EXPECT_EQ(broken_name(f), "(none)");
}

TEST(RowInvariants, SeveralBrokenRulesReportTheFirstInOneDotZeroOrder) {
  RequestRow r = processing_row();
  r.fence = 0;
  r.key_chars = 0;
  r.has_locked_until = false;
  EXPECT_EQ(broken_name(r), "key_length");
  r.key_chars = 3;
  EXPECT_EQ(broken_name(r), "fence_positive");
  r.fence = 2;
  EXPECT_EQ(broken_name(r), "processing_is_locked_and_open");
}

// A NULL in a NOT NULL column never reaches a CHECK (PostgreSQL refuses it
// first); when the function is called by hand, a rule over an unknown value
// holds, as a CHECK whose result is NULL passes.
TEST(RowInvariants, UnknownValuesHoldAsInSql) {
  RequestRow all_null;
  EXPECT_EQ(broken_name(all_null), "(none)");
  RequestRow r = succeeded_row();
  r.status.reset();
  r.has_locked_until = true;  // would break outcome_is_unlocked_and_dated
  r.recovery_point = "x";     // would break finished_means_succeeded
  EXPECT_EQ(broken_name(r), "(none)");
  RequestRow p = processing_row();
  p.created_at.reset();
  p.expires_at = 0;
  EXPECT_EQ(broken_name(p), "(none)");
  // The nullable columns are never unknown: their NULL is a fact the rules read.
  RequestRow s = succeeded_row();
  s.response_code.reset();
  EXPECT_EQ(broken_name(s), "success_has_response");
}

}  // namespace
