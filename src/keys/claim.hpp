// One claim attempt, shared by claim_idempotency_key (one attempt) and
// claim_or_wait (attempts until an answer that is not processing_active).
#pragma once

#include "base/arguments.hpp"
#include "pure/classify.hpp"
#include "policy/scope_policy.hpp"
#include "pg/statements.hpp"

namespace idem {

// A claim's checked arguments as the claim statements' parameters.
struct ClaimRequest {
  Datum params[claim_param_count];
  char nulls[claim_param_count];
  KeyName name;
  TupleDesc result_desc;
  ClaimPolicy policy;  // lock_timeout, retention, max_attempts (scope_policy.hpp)
  uint32 stripe;  // the key's wait stripe (wait_slots.hpp)
  bool key_table_has_binding;  // false before ALTER EXTENSION idem UPDATE to 1.1
};
IDEM_LONGJMP_SAFE(ClaimRequest);

// What one attempt answered.
struct ClaimAnswer {
  ClaimKind kind;
  HeapTuple result;          // idem.claim, in the caller's memory context
  bool locked_until_null;
  TimestampTz locked_until;  // the owner's lock, for processing_active
  bool bound_session_ended;  // a stale takeover of a key whose bound session ended
};
IDEM_LONGJMP_SAFE(ClaimAnswer);

// Checks the arguments: scope, key, request_hash are arguments 0-2, and
// claimed_by, lock_timeout, retention follow from first_option_arg.
void prepare_claim(FunctionCallInfo fcinfo, int first_option_arg, ClaimRequest *request);

// One attempt at the current time (counted in idem.stats by the caller).
void claim_once(ClaimRequest *request, ClaimAnswer *answer);

// idem.peek (src/keys/peek.cpp): what a claim with the stored request hash
// would answer now, read by one probe with nothing written and no ownership
// taken, so no fence. False when that claim would start afresh (no row, or a
// finished row past expires_at). A claim that would end the key at its
// scope's max_attempts reads as the final_failure it would record.
bool peek_once(FunctionCallInfo fcinfo, text *scope, text *key, HeapTuple *result);

// The caller's final answer: counted in idem.stats, returned as idem.claim.
Datum answer_claim(const ClaimAnswer &answer);

}  // namespace idem
