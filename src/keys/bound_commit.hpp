// The commit of a claim bound to its session (idem.bind_lock_to_session;
// docs/internals.md, "A bound claim's commit"): when the claim is the only
// thing its transaction wrote, the transaction commits without waiting for
// its WAL flush, after making the claim's fence durable on its own.
//
// A bound claim lost in a crash or a failover leaves the retry where a
// flushed one would: its session ended with the server, so the key is
// taken over at once and the old owner refused by fence. Its outcome's
// synchronous commit flushes the claim with it, and twins see the claim
// as soon as it commits. What must never be lost is the fence: outcomes
// are checked by fence, not by session, so a fence handed out again after
// a crash would let the old owner (reconnected) record an outcome for the
// retry's claim. Fences come from sequences, which hand out up to 32
// values logged by one WAL record, possibly written by another backend
// and not flushed: before the commit goes asynchronous, the WAL of each
// sequence the claim drew from is flushed (and replicated to a
// synchronous standby) up to its page's LSN, which covers every value it
// handed out.
//
// Anything else written in the transaction, before the claim (it already
// had a transaction id) or after it (WAL past the claim's), keeps the
// commit synchronous, and so do an unbound claim, a PREPARE TRANSACTION,
// synchronous_commit = off (nothing to save) and a node with Citus, whose
// own pre-commit work (remote commits, its 2PC log) runs after idem's
// check and so could not be seen by it.
#pragma once

#include "pg/pg.hpp"

namespace idem::bound_commit {

// Before a claim's first write: whether the transaction had written
// anything already (it holds a transaction id).
bool wrote_before();

// After a claim's write returned its row. `bound_owner`: the claim took
// ownership bound to this session; `wrote_before`: wrote_before() as it was
// before the write. Only a bound claim in a transaction that wrote nothing
// before may commit without its flush; any other claim write keeps it.
void note_claim_write(bool bound_owner, bool wrote_before);

// A fence was drawn from (or moved in) idem.fence_jump_seq, Citus's jump
// lane (fence.cpp): its WAL is flushed with idem.fence_seq's.
void note_jump_lane_drawn();

}  // namespace idem::bound_commit
