// Claim classification: docs/design.md's order of precedence as a pure function of
// what a claim observed. No Postgres header, so it is unit-tested on its own.
#pragma once

namespace idem {

enum class Status { processing, succeeded, failed_retryable, failed_final };

// The claim kinds in the order of the SQL enum idem.claim_kind.
enum class ClaimKind {
  new_claim,
  replay_success,
  processing_active,
  processing_stale,
  retryable_failure,
  final_failure,
};

// What the claim does next with the row it observed.
enum class Action {
  insert,            // no row: insert a fresh one (new_claim)
  regenerate,        // a finished row past expires_at: as if purged, start afresh (new_claim)
  replay_success,    // read-only answer
  replay_failure,    // read-only answer (final_failure)
  report_active,     // read-only answer (processing_active)
  take_over_stale,   // processing with an expired lock (processing_stale)
  take_over_failed,  // failed_retryable (retryable_failure)
  reject_mismatch,   // same key, different request: P4002
};

struct ObservedRow {
  bool exists = false;
  Status status = Status::processing;
  bool same_request_hash = false;
  bool lock_expired = false;  // locked_until <= now (processing rows only)
  bool expired = false;       // expires_at <= now
};

Action classify(const ObservedRow &row) noexcept;

// The claim kind reported for an action (never called for reject_mismatch).
ClaimKind claim_kind_of(Action action) noexcept;

const char *claim_kind_name(ClaimKind kind) noexcept;
const char *status_name(Status status) noexcept;
// Parses a status label; false if it is none of the four.
bool parse_status(const char *label, Status *status) noexcept;

}  // namespace idem
