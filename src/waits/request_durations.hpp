// How long a scope's requests take, from the claim that took the key to the
// outcome that completed it: a running estimate per (database, scope) for
// idem.retry_after, so a twin of a 100 ms request is told to come back in a
// second, not when the owner's five-minute lock would end.
//
// With the preload the estimates live in shared memory (one region of
// shared_memory.cpp) and every backend feeds and reads them; without it each
// backend keeps its own table of the same shape, which knows only what that
// backend completed. Either way it is an estimate: two scopes that hash to
// the same slot take turns, and a sample recorded at the same moment as
// another may be lost. Nothing depends on it being exact.
#pragma once

#include "pg/pg.hpp"

namespace idem::request_durations {

// Records that a request of scope, claimed at claimed_at, completed at now.
void record(text *scope, TimestampTz claimed_at, TimestampTz now);

// The region in shared memory (shared_memory.cpp).
Size shared_size();
void attach_shared(void *memory, bool found);

}  // namespace idem::request_durations
