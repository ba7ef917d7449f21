// The per-statement memo of claims (statement_memo.hpp). How "the same
// statement" is recognised, and why that is sound, is in docs/internals.md,
// "A claim within one statement"; in short:
//   - the memo lives in a child of TopTransactionContext, so it dies with the
//     transaction (a reset callback forgets it): no answer crosses transactions;
//   - the statement is identified by the subtransaction, the statement start
//     time and the command id of the snapshot the calling statement runs
//     with. Calls within one statement see the same three (idem's own SPI
//     statements push and pop snapshots of their own); a later statement of
//     the same transaction that follows any write (a claim that took a key is
//     one) runs with a later command id;
//   - an answer that did not take the key (replay, processing_active) is
//     reused only while nothing it depends on can have changed: no
//     transaction has completed since (the snapshot's completion count) and
//     neither its lock nor its expiry has run out. So a PL/pgSQL loop that
//     claims until a twin finishes, in one statement with no write between
//     its claims, still sees the twin finish.
#include "statement_memo.hpp"

#include "keystore.hpp"

extern "C" {
#include "executor/executor.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"
}

namespace idem {

namespace {

// A statement rarely makes more than a few different claims twice; past
// this, the oldest is forgotten (and a repeat of it claims again).
constexpr int memo_capacity = 8;

// idem.claim's columns read here (1-based).
constexpr int fence_column = 2;
constexpr int locked_until_column = 11;
constexpr int expires_at_column = 12;

struct MemoEntry {
  Size key_length;
  char *key;  // the function and its arguments, serialised (serialise_call)
  Datum answer;
  bool took_key;             // the answer granted ownership (it has a fence)
  TimestampTz valid_until;   // for the others: the earlier of lock and expiry
  uint64 completions;        // for the others: transactions completed before it
};

struct Memo {
  MemoryContext context;  // null when there is no memo (a new transaction)
  SubTransactionId subtransaction;
  TimestampTz statement_start;
  CommandId command;
  int used;
  int next;
  MemoEntry entries[memo_capacity];
};

Memo memo = {};

MemoryContextCallback forget_on_reset;

void forget_memo(void *) { memo.context = nullptr; }

// The calling statement's identity; false when it has none (no snapshot).
bool statement_identity(SubTransactionId *subtransaction, TimestampTz *start, CommandId *command) {
  if (!ActiveSnapshotSet()) return false;
  *subtransaction = GetCurrentSubTransactionId();
  *start = GetCurrentStatementStartTimestamp();
  *command = GetActiveSnapshot()->curcid;
  return true;
}

// The memo of this statement, emptied if it was another statement's.
void enter_statement(SubTransactionId subtransaction, TimestampTz start, CommandId command) {
  if (memo.context != nullptr && memo.subtransaction == subtransaction &&
      memo.statement_start == start && memo.command == command)
    return;
  // The previous statement's memo goes (its callback clears memo.context).
  if (memo.context != nullptr) MemoryContextDelete(memo.context);
  memo.context = AllocSetContextCreate(TopTransactionContext, "idem statement memo",
                                       ALLOCSET_SMALL_SIZES);
  forget_on_reset.func = forget_memo;
  forget_on_reset.arg = nullptr;
  MemoryContextRegisterResetCallback(memo.context, &forget_on_reset);
  memo.subtransaction = subtransaction;
  memo.statement_start = start;
  memo.command = command;
  memo.used = 0;
  memo.next = 0;
}

void append_bytes(StringInfo out, const void *bytes, int length) {
  appendBinaryStringInfo(out, static_cast<const char *>(bytes), length);
}

// get_typlenbyval, without its catalog lookup for the claims' own argument
// types (text, interval), whose storage never changes.
void length_and_by_value(Oid type, int16 *length, bool *by_value) {
  if (type == TEXTOID) {
    *length = -1;
    *by_value = false;
  } else if (type == INTERVALOID) {
    *length = sizeof(Interval);
    *by_value = false;
  } else {
    get_typlenbyval(type, length, by_value);
  }
}

// The function and its arguments as bytes: equal bytes, same claim. False
// when an argument's type is unknown (a call without an expression tree).
bool serialise_call(FunctionCallInfo fcinfo, StringInfo out) {
  append_bytes(out, &fcinfo->flinfo->fn_oid, sizeof(Oid));
  for (int i = 0; i < fcinfo->nargs; ++i) {
    Oid type = get_fn_expr_argtype(fcinfo->flinfo, i);
    if (type == InvalidOid) return false;
    bool is_null = fcinfo->args[i].isnull;
    appendStringInfoChar(out, is_null ? 'n' : 'v');
    if (is_null) continue;
    Datum value = fcinfo->args[i].value;
    int16 length;
    bool by_value;
    length_and_by_value(type, &length, &by_value);
    if (by_value) {
      append_bytes(out, &value, sizeof(Datum));
    } else if (length == -1) {
      struct varlena *bytes = pg_detoast_datum_packed(reinterpret_cast<struct varlena *>(
          DatumGetPointer(value)));
      int size = static_cast<int>(VARSIZE_ANY_EXHDR(bytes));
      append_bytes(out, &size, sizeof size);
      append_bytes(out, VARDATA_ANY(bytes), size);
    } else if (length > 0) {
      append_bytes(out, DatumGetPointer(value), length);
    } else {
      return false;  // cstring: no claim takes one
    }
  }
  return true;
}

uint64 completed_transactions() { return GetLatestSnapshot()->snapXactCompletionCount; }

bool still_valid(const MemoEntry &entry) {
  if (entry.took_key) return true;
  return GetCurrentTimestamp() < entry.valid_until &&
         completed_transactions() == entry.completions;
}

const MemoEntry *find(const StringInfoData &key) {
  for (int i = 0; i < memo.used; ++i) {
    const MemoEntry &entry = memo.entries[i];
    if (entry.key_length == static_cast<Size>(key.len) &&
        memcmp(entry.key, key.data, key.len) == 0)
      return still_valid(entry) ? &entry : nullptr;
  }
  return nullptr;
}

TimestampTz earliest_end(HeapTupleData *claim, TupleDesc desc) {
  TimestampTz end = DT_NOEND;
  const int columns[] = {locked_until_column, expires_at_column};
  for (int column : columns) {
    bool is_null;
    Datum value = heap_getattr(claim, column, desc, &is_null);
    if (!is_null && DatumGetTimestampTz(value) < end) end = DatumGetTimestampTz(value);
  }
  return end;
}

void remember(const StringInfoData &key, Datum answer, uint64 completions_before) {
  // Replace the entry of this key if a stale one is there, else the oldest.
  int slot = -1;
  for (int i = 0; i < memo.used && slot < 0; ++i)
    if (memo.entries[i].key_length == static_cast<Size>(key.len) &&
        memcmp(memo.entries[i].key, key.data, key.len) == 0)
      slot = i;
  if (slot < 0) {
    slot = memo.used < memo_capacity ? memo.used++ : memo.next;
    memo.next = (slot + 1) % memo_capacity;
  }
  MemoEntry &entry = memo.entries[slot];
  MemoryContext caller = MemoryContextSwitchTo(memo.context);
  entry.key = static_cast<char *>(palloc(key.len));
  memcpy(entry.key, key.data, key.len);
  entry.key_length = key.len;
  entry.answer = datumCopy(answer, false, -1);
  MemoryContextSwitchTo(caller);
  // One look at the type cache for the three columns read (GetAttributeByNum
  // would take one each).
  HeapTupleHeader header = DatumGetHeapTupleHeader(answer);
  HeapTupleData claim = heap_tuple_of(header);
  TupleDesc desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(header),
                                          HeapTupleHeaderGetTypMod(header));
  bool fence_is_null;
  heap_getattr(&claim, fence_column, desc, &fence_is_null);
  entry.took_key = !fence_is_null;
  entry.valid_until = earliest_end(&claim, desc);
  ReleaseTupleDesc(desc);
  entry.completions = completions_before;
}

}  // namespace

Datum once_per_statement(FunctionCallInfo fcinfo, Datum (*claim)(FunctionCallInfo)) {
  SubTransactionId subtransaction;
  TimestampTz start;
  CommandId command;
  if (!statement_identity(&subtransaction, &start, &command)) return claim(fcinfo);
  StringInfoData key;
  initStringInfo(&key);
  if (!serialise_call(fcinfo, &key)) return claim(fcinfo);
  enter_statement(subtransaction, start, command);
  if (const MemoEntry *entry = find(key)) return datumCopy(entry->answer, false, -1);
  // Counted before the claim: a transaction completing during it makes the
  // answer out of date at once.
  uint64 completions_before = completed_transactions();
  Datum answer = claim(fcinfo);
  // The claim may have raised; it returned, so the memo is still this statement's.
  remember(key, answer, completions_before);
  return answer;
}

Datum claim_idempotency_key_once(FunctionCallInfo fcinfo) {
  return once_per_statement(fcinfo, claim_idempotency_key);
}

Datum claim_or_wait_once(FunctionCallInfo fcinfo) {
  return once_per_statement(fcinfo, claim_or_wait);
}

}  // namespace idem
