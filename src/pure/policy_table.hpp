// The per-backend copy of idem.scope_policy, by scope: pure C++ (no Postgres
// header), filled by src/policy/scope_policy.cpp when the table changed and read by
// every claim. A lookup allocates nothing and never throws.
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem {

// An interval's three fields, as Postgres stores them.
struct PolicyInterval {
  int64_t time;  // microseconds
  int32_t day;
  int32_t month;
};

// One row; a `has_` flag false means the column is NULL ("not set here").
struct ScopePolicy {
  bool has_lock_timeout;
  PolicyInterval lock_timeout;
  bool has_retention;
  PolicyInterval retention;
  bool keep_forever;
  int32_t max_attempts;          // 0: no limit
  int8_t bind_lock_to_session;   // -1: not set, 0 off, 1 on
};

// Starts a new generation of the table (the previous one stays readable
// until publish_policies).
void begin_policies();
// Adds one row to the generation being built; may throw std::bad_alloc.
void add_policy(const char *scope, size_t scope_bytes, const ScopePolicy &policy);
// Makes the generation being built the one find_policy reads.
void publish_policies() noexcept;

// The policy of a scope, or nullptr when it has none.
const ScopePolicy *find_policy(const char *scope, size_t scope_bytes) noexcept;

}  // namespace idem
