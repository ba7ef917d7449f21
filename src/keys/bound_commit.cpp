// A bound claim's commit without its flush (bound_commit.hpp).
#include "keys/bound_commit.hpp"

#include "pg/catalog_cache.hpp"
#include "pg/guard.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "storage/bufmgr.h"
#include "utils/fmgroids.h"
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
  uint64 nextval_calls;  // nextval expressions the executor set up in the transaction
  uint64 claims_nextval_calls;  // of those, the ones in claims' own writes
};
TransactionState state = {false, false, false, InvalidXLogRecPtr, 0, 0};

// A nextval that hands out a value from a range another backend logged
// writes no WAL and takes no transaction id, so neither check above sees it;
// yet the value is durable only once that backend's record is flushed,
// which a synchronous commit of this transaction would have waited for.
// The executor reports every function expression it sets up (ExecInitFunc,
// the set-returning path, PL/pgSQL's expressions: the object access hook's
// OAT_FUNCTION_EXECUTE), so a transaction whose nextval calls are not all
// its claims' own keeps its flush. (An identity or serial column draws in
// an INSERT, which writes WAL.)
object_access_hook_type previous_object_access_hook = nullptr;

// Whether the hook has seen the whole of the current transaction: not in
// the transaction that loaded the library, whose earlier statements ran
// before it was installed.
bool watching_whole_transaction = false;

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
// it. InvalidXLogRecPtr when the sequence does not exist. Opened without a
// lock of its own: the claim's draw (nextval) holds RowExclusiveLock on the
// sequence until the transaction ends (a subtransaction that drew and was
// rolled back wrote its abort record, so the claim is not eligible), and
// the lock manager's round trip would be a fifth of this check's cost.
XLogRecPtr sequence_lsn(IdemRelation sequence) {
  Oid oid = catalog_cache::relation_oid(sequence);
  if (!OidIsValid(oid)) return InvalidXLogRecPtr;
  Relation relation = relation_open(oid, NoLock);
  Buffer buffer = ReadBuffer(relation, 0);
  XLogRecPtr lsn = BufferGetLSNAtomic(buffer);
  ReleaseBuffer(buffer);
  relation_close(relation, NoLock);
  return lsn;
}

// Fences must never repeat, even when the claim that took one is lost with
// its asynchronous commit: the values handed out are flushed before the
// commit stops waiting for its own flush.
void make_fences_durable() {
  XLogRecPtr lsn = sequence_lsn(IdemRelation::fence_seq);
  if (state.lane_drawn) lsn = Max(lsn, sequence_lsn(IdemRelation::fence_jump_seq));
  if (XLogRecPtrIsInvalid(lsn)) return;
  XLogFlush(lsn);
}

// With a synchronous standby, the fence's WAL would have to reach it too,
// and PostgreSQL's wait for that (SyncRepWaitForLSN) ends the same way
// whether the standby confirmed or the client cancelled the wait: a cancel
// could then let the commit go asynchronous with a fence the standby never
// got, handed out again after a failover. Such a server keeps the flush.
bool synchronous_standby_configured() {
  return SyncRepRequested() && SyncRepStandbyNames != nullptr && SyncRepStandbyNames[0] != '\0';
}

bool may_skip_flush() {
  // XactLastRecEnd still where the claim left it: nothing wrote WAL after it.
  return state.candidate && !state.disqualified && XactLastRecEnd == state.claim_end &&
         state.nextval_calls == state.claims_nextval_calls && watching_whole_transaction &&
         synchronous_commit > SYNCHRONOUS_COMMIT_OFF && !synchronous_standby_configured() &&
         !citus_loaded();
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
      state = TransactionState{false, false, false, InvalidXLogRecPtr, 0, 0};
      watching_whole_transaction = true;
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

static void idem_bound_commit_object_access(ObjectAccessType access, Oid class_id, Oid object_id,
                                            int sub_id, void *arg) {
  if (idem::bound_commit::previous_object_access_hook != nullptr)
    idem::bound_commit::previous_object_access_hook(access, class_id, object_id, sub_id, arg);
  if (access == OAT_FUNCTION_EXECUTE && object_id == F_NEXTVAL)
    ++idem::bound_commit::state.nextval_calls;
}
}

namespace idem::bound_commit {

void install() {
  if (callback_registered) return;
  RegisterXactCallback(idem_bound_commit_xact_callback, nullptr);
  previous_object_access_hook = object_access_hook;
  object_access_hook = idem_bound_commit_object_access;
  callback_registered = true;
  // Loaded outside a transaction (preloaded, or at a session's start), the
  // hook sees every transaction; loaded by a call, not that one's start.
  watching_whole_transaction = !IsTransactionState();
}

ClaimStart claim_start() {
  return ClaimStart{TransactionIdIsValid(GetTopTransactionIdIfAny()), state.nextval_calls};
}

void note_claim_write(bool bound_owner, ClaimStart start) {
  state.claims_nextval_calls += state.nextval_calls - start.nextval_calls;
  if (!bound_owner || start.wrote_before) {
    state.disqualified = true;
    return;
  }
  state.candidate = true;
  state.claim_end = XactLastRecEnd;
}

void note_jump_lane_drawn() { state.lane_drawn = true; }

}  // namespace idem::bound_commit
