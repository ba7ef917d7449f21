// A bound claim's commit without its flush (bound_commit.hpp).
#include "keys/bound_commit.hpp"

#include "pg/catalog_cache.hpp"
#include "pg/guard.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "storage/bufmgr.h"
}

namespace idem::bound_commit {

namespace {

using catalog_cache::IdemRelation;

// What the current transaction's claims wrote; cleared at its end.
struct TransactionState {
  bool candidate;        // a bound claim wrote in a transaction that had written nothing
  bool disqualified;     // anything else a claim wrote (the WAL check sees the rest)
  bool lane_drawn;       // a fence came from idem.fence_jump_seq
  XLogRecPtr claim_end;  // XactLastRecEnd right after the bound claim's write
};
TransactionState state = {false, false, false, InvalidXLogRecPtr};

// synchronous_commit as it was before this transaction's commit made it
// off, restored at the transaction's end; -1 when it was not changed.
int saved_synchronous_commit = -1;
bool callback_registered = false;

// Citus's pre-commit callback (registered when Citus loaded, before idem's,
// so called after it) commits remote transactions, or prepares them and
// logs them locally for its 2PC: work idem's check cannot see, which a
// synchronous commit covers and an asynchronous one would not. A node with
// Citus loaded keeps every flush. Citus is preloaded or absent for a
// backend's whole life, so this is asked once.
enum class Presence { unknown, absent, present };
Presence citus = Presence::unknown;

bool citus_loaded() {
  if (citus == Presence::unknown)
    citus = GetConfigOption("citus.node_conninfo", true, false) != nullptr ? Presence::present
                                                                          : Presence::absent;
  return citus == Presence::present;
}

// The LSN of the last WAL record of the sequence: each record logs the
// values the sequence may hand out before its next one, so every value it
// has handed out is covered by the WAL up to here, whichever backend wrote
// it. InvalidXLogRecPtr when the sequence does not exist.
XLogRecPtr sequence_lsn(IdemRelation sequence) {
  Oid oid = catalog_cache::relation_oid(sequence);
  if (!OidIsValid(oid)) return InvalidXLogRecPtr;
  Relation relation = relation_open(oid, AccessShareLock);
  Buffer buffer = ReadBuffer(relation, 0);
  XLogRecPtr lsn = BufferGetLSNAtomic(buffer);
  ReleaseBuffer(buffer);
  relation_close(relation, NoLock);
  return lsn;
}

// Fences must never repeat, even when the claim that took one is lost with
// its asynchronous commit: the values handed out are made durable (and
// replicated to a synchronous standby, as synchronous_commit asks; a no-op
// without one) before the commit stops waiting for its own flush.
void make_fences_durable() {
  XLogRecPtr lsn = sequence_lsn(IdemRelation::fence_seq);
  if (state.lane_drawn) lsn = Max(lsn, sequence_lsn(IdemRelation::fence_jump_seq));
  if (XLogRecPtrIsInvalid(lsn)) return;
  XLogFlush(lsn);
  SyncRepWaitForLSN(lsn, false);
}

bool may_skip_flush() {
  // XactLastRecEnd still where the claim left it: nothing wrote WAL after it.
  return state.candidate && !state.disqualified && XactLastRecEnd == state.claim_end &&
         synchronous_commit > SYNCHRONOUS_COMMIT_OFF && !citus_loaded();
}

void before_commit() {
  if (!may_skip_flush()) return;
  make_fences_durable();
  // For this commit alone: RecordTransactionCommit reads the variable (and
  // SyncRepWaitForLSN, through SyncRepRequested()), and the COMMIT event
  // right after it, or the ABORT of a commit that failed, puts it back.
  // Not set_config_option(... GUC_ACTION_LOCAL ...): that costs about
  // 20,000 instructions on PostgreSQL 15 (its AtEOXact_GUC then walks
  // every setting), 4% of a new key's lifecycle; nothing between here and
  // the COMMIT event reads the setting through the GUC machinery.
  saved_synchronous_commit = synchronous_commit;
  synchronous_commit = SYNCHRONOUS_COMMIT_OFF;
  ereport(DEBUG1, (errmsg_internal("idem: a bound claim commits without waiting for its flush")));
}

void at_transaction_event(XactEvent event) {
  switch (event) {
    case XACT_EVENT_PRE_COMMIT:
      before_commit();
      break;
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PREPARE:
    case XACT_EVENT_PARALLEL_COMMIT:
    case XACT_EVENT_PARALLEL_ABORT:
      if (saved_synchronous_commit >= 0) synchronous_commit = saved_synchronous_commit;
      saved_synchronous_commit = -1;
      state = TransactionState{false, false, false, InvalidXLogRecPtr};
      break;
    // A PREPARE TRANSACTION (Citus's 2PC too) keeps its flush: a prepared
    // transaction may commit long after, from another session.
    case XACT_EVENT_PRE_PREPARE:
    case XACT_EVENT_PARALLEL_PRE_COMMIT:
      break;
  }
}

}  // namespace

}  // namespace idem::bound_commit

extern "C" {
static void idem_bound_commit_xact_callback(XactEvent event, void *) {
  idem::run_guarded([event]() -> Datum {
    idem::bound_commit::at_transaction_event(event);
    return 0;
  });
}
}

namespace idem::bound_commit {

namespace {

void register_callback() {
  if (callback_registered) return;
  RegisterXactCallback(idem_bound_commit_xact_callback, nullptr);
  callback_registered = true;
}

}  // namespace

bool wrote_before() { return TransactionIdIsValid(GetTopTransactionIdIfAny()); }

void note_claim_write(bool bound_owner, bool wrote_before) {
  register_callback();
  if (!bound_owner || wrote_before) {
    state.disqualified = true;
    return;
  }
  state.candidate = true;
  state.claim_end = XactLastRecEnd;
}

void note_jump_lane_drawn() {
  register_callback();
  state.lane_drawn = true;
}

}  // namespace idem::bound_commit
