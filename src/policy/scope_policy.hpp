// Per-scope policy (idem.scope_policy, docs/policy.md): a per-backend cache
// of the table and the precedence every call applies, an explicit argument,
// then the scope's policy, then the setting.
#pragma once

#include "base/arguments.hpp"
#include "pg/pg.hpp"
#include "pure/policy_table.hpp"

namespace idem {

// The policy of a scope, or nullptr. Reloads the cache (one SPI query, in a
// session of its own, so call it before connecting) only after a change of
// idem.scope_policy was committed or rolled back; otherwise a hash lookup.
const ScopePolicy *scope_policy_for(const text *scope);

// What a claim uses: lock_timeout and retention resolved (an argument at
// argno lock_argno / lock_argno + 1 first), and its scope's attempt limit.
struct ClaimPolicy {
  Interval lock_timeout;
  Interval retention;
  bool expires;          // false: keys of this claim never expire
  int32 max_attempts;    // 0: no limit
};
IDEM_LONGJMP_SAFE(ClaimPolicy);

void resolve_claim_policy(FunctionCallInfo fcinfo, int lock_argno, const text *scope,
                          TimestampTz now, const KeyName &name, ClaimPolicy *out);

// The claim that would start attempt max_attempts + 1 ends the key instead.
bool attempts_exhausted(const ClaimPolicy &policy, int32 attempt_count);

// idem.bind_lock_to_session for a claim of scope: the scope's policy when it
// sets one, else setting_value (the session's setting).
bool bind_lock_to_session_for(const text *scope, bool setting_value);

}  // namespace idem
