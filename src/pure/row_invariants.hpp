// The invariants of one idem.idempotency_request row, as a pure function of
// its columns. The key table has one CHECK constraint, calling
// idem.request_invariants_hold(), which judges the row here (the Postgres
// side is keys/invariants.cpp), rather than a CHECK per rule: PostgreSQL
// rebuilds every CHECK expression at every INSERT and UPDATE statement. Each
// invariant keeps the name of the 1.0 constraint it stands for, so an error
// says which rule broke in the words applications already match.
// No Postgres header (row_invariants.cpp includes pure.hpp first), so it is
// unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "pure/classify.hpp"

namespace idem {

namespace sqlstate {
inline constexpr char check_violation[] = "23514";
}  // namespace sqlstate

// 1.0's constraints, in the order 1.0 declared them.
enum class Invariant {
  scope_length,
  key_length,
  request_hash_present,
  fence_positive,
  attempt_count_positive,
  recovery_point_present,
  response_code_is_http_status,
  expires_after_creation,
  finished_means_succeeded,
  processing_is_locked_and_open,
  outcome_is_unlocked_and_dated,
  success_has_response,
  failure_has_code,
};
inline constexpr int invariant_count = 13;

// What the invariants read of a row. An empty optional is a NULL. The
// NOT NULL columns (scope ... expires_at) are NULL only when the function is
// called by hand, since PostgreSQL checks NOT NULL before any CHECK; an
// invariant over a NULL among them holds, as a CHECK whose result is NULL
// passes. Trivially destructible: the shim fills it in a frame Postgres may
// longjmp through, and the texts point into the arguments' memory.
struct RequestRow {
  std::optional<std::size_t> scope_chars;  // char_length(scope)
  std::optional<std::size_t> key_chars;    // char_length(key)
  std::optional<std::size_t> request_hash_bytes;
  std::optional<Status> status;
  std::optional<std::string_view> recovery_point;
  std::optional<std::int64_t> fence;
  std::optional<std::int32_t> attempt_count;
  bool has_locked_until = false;
  std::optional<std::int32_t> response_code;
  bool has_response_body = false;
  std::optional<std::string_view> failure_code;
  bool has_failure_message = false;
  // timestamptz as PostgreSQL stores it (microseconds; infinity is INT64_MAX).
  std::optional<std::int64_t> created_at;
  bool has_finished_at = false;
  std::optional<std::int64_t> expires_at;
};
static_assert(std::is_trivially_destructible_v<RequestRow>,
              "RequestRow lives in a frame Postgres may longjmp through");

struct InvariantText {
  const char *name;  // the 1.0 constraint's name
  const char *rule;  // errdetail
  const char *hint;  // errhint
};

bool holds(Invariant invariant, const RequestRow &row) noexcept;

// The first invariant (in 1.0's order) the row breaks; none when all hold.
std::optional<Invariant> first_broken_invariant(const RequestRow &row) noexcept;

const InvariantText &text_of(Invariant invariant) noexcept;

// Throws idem::Error with SQLSTATE 23514 (check_violation) naming the first
// broken invariant, with its rule and a hint; returns when all hold.
void require_invariants(const RequestRow &row);

}  // namespace idem
