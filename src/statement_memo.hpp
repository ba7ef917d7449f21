// A claim is idempotent within one SQL statement: the same claim (the same
// function with the same arguments) called again by the statement that
// already made it gets the first call's answer instead of claiming again.
//
// Why: `SELECT (idem.claim_idempotency_key(...)).*` makes PostgreSQL call the
// function once per column of idem.claim; without this, the first call takes
// the key (a fence) and the next ones see it taken (no fence), so the row the
// caller reads mixes the answers and the key stays locked with a fence nobody
// saw. docs/internals.md, "A claim within one statement", explains how "the
// same statement" is recognised.
#pragma once

#include "pg.hpp"

namespace idem {

// Runs claim(fcinfo) unless the current statement already made the same
// claim, whose answer (idem.claim) is then returned again. Any claim function
// returning idem.claim can be wrapped: claim_idempotency_key, claim_or_wait.
Datum once_per_statement(FunctionCallInfo fcinfo, Datum (*claim)(FunctionCallInfo));

// claim_idempotency_key behind once_per_statement: the SQL entry point.
Datum claim_idempotency_key_once(FunctionCallInfo fcinfo);

// claim_or_wait behind once_per_statement: the SQL entry point.
Datum claim_or_wait_once(FunctionCallInfo fcinfo);

}  // namespace idem
