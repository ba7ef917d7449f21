#include "pure/pure.hpp"

#include "pure/classify.hpp"

#include <cstring>

namespace idem {

Action classify(const ObservedRow &row) noexcept {
  if (!row.exists) return Action::insert;
  // A finished row past its expiry is treated as already purged, so even a
  // different request hash may start a new generation of the key. In-flight
  // rows never expire this way: their owner may still be working.
  if (row.status != Status::processing && row.expired) return Action::regenerate;
  if (!row.same_request_hash) return Action::reject_mismatch;
  switch (row.status) {
    case Status::succeeded:
      return Action::replay_success;
    case Status::failed_final:
      return Action::replay_failure;
    case Status::failed_retryable:
      return Action::take_over_failed;
    case Status::processing:
      return row.lock_expired ? Action::take_over_stale : Action::report_active;
  }
  return Action::reject_mismatch;  // unreachable: every status is handled above
}

ClaimKind claim_kind_of(Action action) noexcept {
  switch (action) {
    case Action::insert:
    case Action::regenerate:
      return ClaimKind::new_claim;
    case Action::replay_success:
      return ClaimKind::replay_success;
    case Action::replay_failure:
      return ClaimKind::final_failure;
    case Action::report_active:
      return ClaimKind::processing_active;
    case Action::take_over_stale:
      return ClaimKind::processing_stale;
    case Action::take_over_failed:
      return ClaimKind::retryable_failure;
    case Action::reject_mismatch:
      break;
  }
  return ClaimKind::new_claim;
}

const char *claim_kind_name(ClaimKind kind) noexcept {
  switch (kind) {
    case ClaimKind::new_claim: return "new_claim";
    case ClaimKind::replay_success: return "replay_success";
    case ClaimKind::processing_active: return "processing_active";
    case ClaimKind::processing_stale: return "processing_stale";
    case ClaimKind::retryable_failure: return "retryable_failure";
    case ClaimKind::final_failure: return "final_failure";
  }
  return "?";
}

const char *status_name(Status status) noexcept {
  switch (status) {
    case Status::processing: return "processing";
    case Status::succeeded: return "succeeded";
    case Status::failed_retryable: return "failed_retryable";
    case Status::failed_final: return "failed_final";
  }
  return "?";
}

bool parse_status(const char *label, Status *status) noexcept {
  static const Status all[] = {Status::processing, Status::succeeded,
                               Status::failed_retryable, Status::failed_final};
  for (Status candidate : all) {
    if (std::strcmp(label, status_name(candidate)) == 0) {
      *status = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace idem
