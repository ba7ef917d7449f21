// The fence a takeover or a new generation writes on a key's existing row
// (docs/internals.md, "Fences across nodes"). Drawn before the claim's
// UPDATE runs, not inside it: Citus refuses a VOLATILE function (nextval)
// anywhere in an UPDATE of a distributed table.
//
// A fence never goes back for a key. On one server idem.fence_seq only
// rises, so its next value is above every fence a row holds. On Citus each
// node has its own sequence (INCREMENT BY 2048, values congruent to the
// node's group id g), and a shard moved from a node further ahead brings
// rows whose fences are above this node's next value: then the fence
// "jumps" to the smallest value above the row's of the node's jump lane,
// idem.fence_jump_seq (INCREMENT BY 2048, values congruent to g + 1024),
// which only jumpers draw from and move, one at a time, so it only rises
// and never issues a value twice; idem.fence_seq is never set back.
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The next fence of idem.fence_seq, or of the jump lane above old_fence as said above.
int64 fence_above(int64 old_fence);

}  // namespace idem
