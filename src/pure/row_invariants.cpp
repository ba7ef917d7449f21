#include "pure/pure.hpp"

#include "pure/row_invariants.hpp"

#include <string>

#include "pure/errors.hpp"

namespace idem {

namespace {

constexpr std::size_t max_name_chars = 255;

// The texts, indexed by Invariant. Each rule states 1.0's CHECK expression.
constexpr InvariantText texts[invariant_count] = {
    {"scope_length", "The scope is 1 to 255 characters long (char_length(scope) BETWEEN 1 AND 255).",
     "idem.claim_idempotency_key refuses any other scope (P4000)."},
    {"key_length", "The key is 1 to 255 characters long (char_length(key) BETWEEN 1 AND 255).",
     "idem.claim_idempotency_key refuses any other key (P4001)."},
    {"request_hash_present", "request_hash is not empty (request_hash <> '').",
     "Store the fingerprint the key was claimed with, e.g. idem.request_hash(body)."},
    {"fence_positive", "fence is positive (fence > 0).",
     "Fences come from idem.fence_seq; only a claim issues one."},
    {"attempt_count_positive", "attempt_count is at least 1 (attempt_count >= 1).",
     "The claim that creates a key counts attempt 1; each takeover adds one."},
    {"recovery_point_present", "recovery_point is not empty (recovery_point <> '').",
     "A key starts at 'started'; idem.set_recovery_point moves it on."},
    {"response_code_is_http_status",
     "response_code, when set, is an HTTP status (response_code BETWEEN 100 AND 599).",
     "Store the status code the API answered with."},
    {"expires_after_creation", "expires_at is later than created_at (expires_at > created_at).",
     "A key that never expires has expires_at = 'infinity'; idem.force_expire makes a key "
     "count as expired now."},
    {"finished_means_succeeded",
     "recovery_point is 'finished' exactly when status is 'succeeded' "
     "((recovery_point = 'finished') = (status = 'succeeded')).",
     "Only idem.mark_succeeded finishes a key; a failed or in-flight key keeps its last "
     "recovery point."},
    {"processing_is_locked_and_open",
     "A processing key holds a lock and has no outcome yet: locked_until is set; finished_at, "
     "response_code and response_body are NULL.",
     "Record an outcome with idem.mark_succeeded or idem.mark_failed, which change the status, "
     "the lock and the outcome together."},
    {"outcome_is_unlocked_and_dated",
     "A key that is not processing holds no lock and records when it finished: locked_until is "
     "NULL and finished_at is set.",
     "Change the status, locked_until and finished_at together, as idem.mark_succeeded, "
     "idem.mark_failed and idem.sweep_stale do."},
    {"success_has_response",
     "A succeeded key has a response_code and no failure: response_code is set; failure_code "
     "and failure_message are NULL.",
     "Record a success with idem.mark_succeeded, which stores the response to replay."},
    {"failure_has_code",
     "A failed key (failed_retryable or failed_final) has a failure_code that is not empty.",
     "Record a failure with idem.mark_failed, which requires a failure_code."},
};

bool name_length_ok(const std::optional<std::size_t> &chars) {
  return !chars || (*chars >= 1 && *chars <= max_name_chars);
}

bool nonempty(const std::optional<std::size_t> &bytes) { return !bytes || *bytes > 0; }

bool nonempty(const std::optional<std::string_view> &value) { return !value || !value->empty(); }

bool is_failure(Status status) {
  return status == Status::failed_retryable || status == Status::failed_final;
}

}  // namespace

bool holds(Invariant invariant, const RequestRow &row) noexcept {
  switch (invariant) {
    case Invariant::scope_length:
      return name_length_ok(row.scope_chars);
    case Invariant::key_length:
      return name_length_ok(row.key_chars);
    case Invariant::request_hash_present:
      return nonempty(row.request_hash_bytes);
    case Invariant::fence_positive:
      return !row.fence || *row.fence > 0;
    case Invariant::attempt_count_positive:
      return !row.attempt_count || *row.attempt_count >= 1;
    case Invariant::recovery_point_present:
      return nonempty(row.recovery_point);
    case Invariant::response_code_is_http_status:
      return !row.response_code || (*row.response_code >= 100 && *row.response_code <= 599);
    case Invariant::expires_after_creation:
      return !row.expires_at || !row.created_at || *row.expires_at > *row.created_at;
    case Invariant::finished_means_succeeded:
      return !row.recovery_point || !row.status ||
             (*row.recovery_point == "finished") == (*row.status == Status::succeeded);
    case Invariant::processing_is_locked_and_open:
      return row.status != Status::processing ||
             (row.has_locked_until && !row.has_finished_at && !row.response_code &&
              !row.has_response_body);
    case Invariant::outcome_is_unlocked_and_dated:
      return !row.status || *row.status == Status::processing ||
             (!row.has_locked_until && row.has_finished_at);
    case Invariant::success_has_response:
      return row.status != Status::succeeded ||
             (row.response_code && !row.failure_code && !row.has_failure_message);
    case Invariant::failure_has_code:
      return !row.status || !is_failure(*row.status) ||
             (row.failure_code && !row.failure_code->empty());
  }
  return false;  // unreachable: every invariant is handled above
}

std::optional<Invariant> first_broken_invariant(const RequestRow &row) noexcept {
  for (int i = 0; i < invariant_count; ++i) {
    auto invariant = static_cast<Invariant>(i);
    if (!holds(invariant, row)) return invariant;
  }
  return std::nullopt;
}

const InvariantText &text_of(Invariant invariant) noexcept {
  return texts[static_cast<int>(invariant)];
}

void require_invariants(const RequestRow &row) {
  std::optional<Invariant> broken = first_broken_invariant(row);
  if (!broken) return;
  const InvariantText &text = text_of(*broken);
  throw Error(sqlstate::check_violation,
              Message("new row violates idem invariant \"%s\"", text.name), text.rule,
              text.hint);
}

}  // namespace idem

// This file is pure C++: the unit tests build it without Postgres.
#ifdef POSTGRES_H
#error "row_invariants.cpp must not include Postgres headers"
#endif
