// One answer per row (statement_memo.hpp has the rule; docs/internals.md,
// "A claim within one statement", why it is sound). How each part of the
// rule is checked:
//   - the row: the memo is bound to the memory context the calls run in
//     (CurrentMemoryContext, the executor's per-row context or PL/pgSQL's
//     per-statement one) by a reset callback registered on it, which unbinds
//     the memo when that context is reset or deleted;
//   - nothing written since: backend_writes::current(), the command id and
//     the subtransaction id, recorded when the answers were made;
//   - the calling expression: its FmgrInfo's fn_extra keeps the generation of
//     the last answer it took (answers are numbered in the order made), and
//     its argument types;
//   - the transaction: the memo's context is a child of TopTransactionContext,
//     whose reset callback forgets the memo when the transaction ends.
#include "keys/statement_memo.hpp"

#include "keys/backend_writes.hpp"

extern "C" {
#include "utils/datum.h"
}

namespace idem {

namespace {

// A row rarely holds more than one answer ((f(...)).*), or a few when it
// interleaves the columns of different calls; past this, the oldest is
// forgotten, and a repeat of it calls again.
constexpr int memo_capacity = 4;

struct MemoEntry {
  Size key_length;
  char *key;         // the function and its arguments, serialised (serialise_call)
  Datum answer;      // an idem.claim
  uint64 generation; // answers are numbered in the order they were made
};

struct Memo {
  MemoryContext context;      // null when there is no memo (a new transaction)
  MemoryContext row;          // the row the answers belong to; null once it ended
  uint64 row_watch;           // the number of the reset callback watching it
  SubTransactionId subtransaction;
  std::uint64_t writes;       // backend_writes::current() when the answers were made
  CommandId command;
  int used;
  int next;
  MemoEntry entries[memo_capacity];
};

// The memoised functions take at most this many arguments.
constexpr int max_arguments = 8;

// What one calling expression (one FmgrInfo) last took from the memo, and its
// argument types, which never change (looked up in the expression tree once).
struct CallSite {
  uint64 taken;  // the generation of its last answer, 0 for none
  bool types_known;
  Oid types[max_arguments];
};

// The reset callback of a row's memory context, allocated in that context.
struct RowWatch {
  MemoryContextCallback callback;
  uint64 number;
};

Memo memo = {};
uint64 last_generation = 0;
uint64 last_row_watch = 0;

// The transaction's end (its TopTransactionContext reset or deleted) takes
// the memo's context with it.
void forget_memo(void *) {
  memo.context = nullptr;
  memo.used = 0;
}

// A context that is reset or deleted calls back here; only the watch of
// the current row unbinds it (an older row's watch may fire much later).
void row_ended(void *arg) {
  const RowWatch *watch = static_cast<const RowWatch *>(arg);
  if (watch->number == memo.row_watch) memo.row = nullptr;
}

// Drops every answer, keeping the context's first block for the next ones.
void forget_answers() {
  if (memo.used > 0) MemoryContextReset(memo.context);
  memo.used = 0;
  memo.next = 0;
}

// True when the memo's answers still belong to this call's row and nothing
// was written since they were made.
bool answers_current() {
  return memo.context != nullptr && memo.used > 0 && memo.row == CurrentMemoryContext &&
         memo.subtransaction == GetCurrentSubTransactionId() &&
         memo.writes == backend_writes::current() &&
         memo.command == GetCurrentCommandId(false);
}

// Binds the memo to the row this call runs in; forgets the answers of any
// other row.
void enter_row() {
  if (memo.context == nullptr) {
    // The callback is on the parent, not on the memo's context, which is
    // reset at every new row (a reset calls back too).
    MemoryContextCallback *at_end = static_cast<MemoryContextCallback *>(
        MemoryContextAlloc(TopTransactionContext, sizeof(MemoryContextCallback)));
    at_end->func = forget_memo;
    at_end->arg = nullptr;
    MemoryContextRegisterResetCallback(TopTransactionContext, at_end);
    memo.context = AllocSetContextCreate(TopTransactionContext, "idem claim memo",
                                         ALLOCSET_SMALL_SIZES);
    memo.used = 0;
    memo.next = 0;
  }
  if (memo.row == CurrentMemoryContext) return;
  forget_answers();
  // Allocated in the row's context: freed with it, after calling back.
  RowWatch *watch = static_cast<RowWatch *>(palloc(sizeof(RowWatch)));
  watch->number = ++last_row_watch;
  watch->callback.func = row_ended;
  watch->callback.arg = watch;
  MemoryContextRegisterResetCallback(CurrentMemoryContext, &watch->callback);
  memo.row = CurrentMemoryContext;
  memo.row_watch = watch->number;
}

CallSite *call_site(FmgrInfo *flinfo) {
  if (flinfo->fn_extra == nullptr)
    flinfo->fn_extra = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(CallSite));
  return static_cast<CallSite *>(flinfo->fn_extra);
}

void append_bytes(StringInfo out, const void *bytes, int length) {
  appendBinaryStringInfo(out, static_cast<const char *>(bytes), length);
}

// get_typlenbyval, without its catalog lookup for the types of the
// functions' own arguments, whose storage never changes.
void length_and_by_value(Oid type, int16 *length, bool *by_value) {
  switch (type) {
    case TEXTOID:
    case JSONBOID:
      *length = -1;
      *by_value = false;
      return;
    case INTERVALOID:
      *length = sizeof(Interval);
      *by_value = false;
      return;
    case INT8OID:
      *length = 8;
      *by_value = true;
      return;
    case INT4OID:
      *length = 4;
      *by_value = true;
      return;
    case BOOLOID:
      *length = 1;
      *by_value = true;
      return;
    default:
      get_typlenbyval(type, length, by_value);
  }
}

// False when an argument's type is unknown (a call without an expression
// tree) or there are more arguments than a memoised function takes.
bool know_argument_types(FunctionCallInfo fcinfo, CallSite *site) {
  if (site->types_known) return true;
  if (fcinfo->nargs > max_arguments) return false;
  for (int i = 0; i < fcinfo->nargs; ++i) {
    site->types[i] = get_fn_expr_argtype(fcinfo->flinfo, i);
    if (site->types[i] == InvalidOid) return false;
  }
  site->types_known = true;
  return true;
}

// The function and its arguments as bytes: equal bytes, same call. False
// when they cannot be told apart by their bytes.
bool serialise_call(FunctionCallInfo fcinfo, CallSite *site, StringInfo out) {
  if (!know_argument_types(fcinfo, site)) return false;
  append_bytes(out, &fcinfo->flinfo->fn_oid, sizeof(Oid));
  for (int i = 0; i < fcinfo->nargs; ++i) {
    Oid type = site->types[i];
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
      return false;  // cstring: no memoised function takes one
    }
  }
  return true;
}

bool same_key(const MemoEntry &entry, const StringInfoData &key) {
  return entry.key_length == static_cast<Size>(key.len) &&
         memcmp(entry.key, key.data, key.len) == 0;
}

const MemoEntry *find(const StringInfoData &key) {
  for (int i = 0; i < memo.used; ++i)
    if (same_key(memo.entries[i], key)) return &memo.entries[i];
  return nullptr;
}

// Keeps the answer a call just made, for the other columns of its row, and
// returns its generation. Earlier answers go if anything was written since
// they were made, this call's own writes included.
uint64 remember(const StringInfoData &key, Datum answer) {
  enter_row();  // again: the call may have run another memoised call (a trigger)
  if (memo.writes != backend_writes::current() ||
      memo.subtransaction != GetCurrentSubTransactionId() ||
      memo.command != GetCurrentCommandId(false))
    forget_answers();
  int slot = -1;
  for (int i = 0; i < memo.used && slot < 0; ++i)
    if (same_key(memo.entries[i], key)) slot = i;
  bool occupied = slot >= 0;
  if (slot < 0) {
    occupied = memo.used == memo_capacity;
    slot = occupied ? memo.next : memo.used++;
    memo.next = (slot + 1) % memo_capacity;
  }
  MemoEntry &entry = memo.entries[slot];
  if (occupied) {
    pfree(entry.key);
    pfree(DatumGetPointer(entry.answer));
  }
  MemoryContext caller = MemoryContextSwitchTo(memo.context);
  entry.key = static_cast<char *>(palloc(key.len));
  memcpy(entry.key, key.data, key.len);
  entry.key_length = key.len;
  entry.answer = datumCopy(answer, false, -1);
  MemoryContextSwitchTo(caller);
  entry.generation = ++last_generation;
  memo.subtransaction = GetCurrentSubTransactionId();
  memo.writes = backend_writes::current();
  memo.command = GetCurrentCommandId(false);
  return entry.generation;
}

}  // namespace

Datum once_per_row(FunctionCallInfo fcinfo, Datum (*body)(FunctionCallInfo)) {
  if (fcinfo->flinfo == nullptr) return body(fcinfo);
  CallSite *site = call_site(fcinfo->flinfo);
  StringInfoData key;
  initStringInfo(&key);
  if (!serialise_call(fcinfo, site, &key)) return body(fcinfo);
  if (answers_current()) {
    const MemoEntry *entry = find(key);
    if (entry != nullptr && entry->generation > site->taken) {
      site->taken = entry->generation;
      pfree(key.data);
      return datumCopy(entry->answer, false, -1);
    }
  }
  Datum answer = body(fcinfo);
  // body returned: errors are never remembered.
  if (!fcinfo->isnull) site->taken = remember(key, answer);
  pfree(key.data);
  return answer;
}

}  // namespace idem
