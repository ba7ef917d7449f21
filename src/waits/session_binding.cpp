// The registry of live session tokens behind session_binding.hpp.
#include "waits/session_binding.hpp"

#include "pure/errors.hpp"
#include "pg/guard.hpp"
#include "pg/settings.hpp"
#include "waits/wait_slots.hpp"

extern "C" {
#include "access/xlog.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "utils/array.h"
}

namespace idem::session_binding {

namespace {

struct Registry {
  pg_atomic_uint64 next_token;
  int size;                       // MaxBackends when the server started
  pg_atomic_uint64 tokens[FLEXIBLE_ARRAY_MEMBER];  // 0: free
};

Registry *shared = nullptr;  // set in every process by attach_shared

int my_slot = -1;
int64 token = 0;

// Stripes of the keys this session bound: their waiters wake when it ends.
constexpr int stripe_words = 1024 / 64;
uint64 bound_stripes[stripe_words];

void release(int, Datum) {
  if (my_slot < 0) return;
  pg_atomic_write_u64(&shared->tokens[my_slot], 0);
  my_slot = -1;
  for (int w = 0; w < stripe_words; ++w)
    for (int bit = 0; bit < 64; ++bit)
      if (bound_stripes[w] & (uint64{1} << bit)) wait_slots::wake_now(w * 64 + bit);
}

}  // namespace

}  // namespace idem::session_binding

extern "C" {
static void idem_release_session_token(int code, Datum arg) {
  idem::run_guarded([code, arg]() -> Datum {
    idem::session_binding::release(code, arg);
    return 0;
  });
}
}

namespace idem::session_binding {

bool wanted() { return settings.bind_lock_to_session; }

int64 my_token() {
  if (my_slot >= 0) return token;
  if (shared == nullptr)
    ereport(ERROR,
            (errcode_of(sqlstate::not_preloaded),
             errmsg("idem.bind_lock_to_session needs idem in shared_preload_libraries"),
             errdetail("Without the preload there is no registry of live sessions to bind a key "
                       "to."),
             errhint("Add idem to shared_preload_libraries and restart, or turn "
                     "idem.bind_lock_to_session off.")));
  uint64 candidate = pg_atomic_fetch_add_u64(&shared->next_token, 1);
  for (int i = 0; i < shared->size; ++i) {
    uint64 expected = 0;
    if (pg_atomic_compare_exchange_u64(&shared->tokens[i], &expected, candidate)) {
      token = static_cast<int64>(candidate);
      before_shmem_exit(idem_release_session_token, 0);
      my_slot = i;
      return token;
    }
  }
  // One slot per backend: only a server with more sessions than MaxBackends
  // at start (impossible) could get here.
  ereport(ERROR, (errcode_of(sqlstate::internal), errmsg("no free slot in idem's session registry"),
                  errhint("This is a bug in idem; please report it.")));
}

void note_bound_stripe(uint32 stripe) { bound_stripes[stripe / 64] |= uint64{1} << (stripe % 64); }

bool alive(int64 stored) {
  if (shared == nullptr || RecoveryInProgress()) return true;
  for (int i = 0; i < shared->size; ++i)
    if (pg_atomic_read_u64(&shared->tokens[i]) == static_cast<uint64>(stored)) return true;
  return false;
}

bool registered(int64 stored) {
  for (int i = 0; shared != nullptr && i < shared->size; ++i)
    if (pg_atomic_read_u64(&shared->tokens[i]) == static_cast<uint64>(stored)) return true;
  return false;
}

Datum live_tokens_array() {
  int count = 0;
  Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * (shared ? shared->size : 1)));
  for (int i = 0; shared != nullptr && i < shared->size; ++i) {
    uint64 live = pg_atomic_read_u64(&shared->tokens[i]);
    if (live != 0) values[count++] = Int64GetDatum(static_cast<int64>(live));
  }
  return PointerGetDatum(construct_array(values, count, INT8OID, sizeof(int64), true,
                                         TYPALIGN_DOUBLE));
}

Size shared_size() {
  return add_size(offsetof(Registry, tokens), mul_size(MaxBackends, sizeof(pg_atomic_uint64)));
}

void attach_shared(void *memory, bool found) {
  shared = static_cast<Registry *>(memory);
  if (found) return;
  shared->size = MaxBackends;
  // Counting up from the clock: no token of an earlier server life (before a
  // crash restart, or on the primary before a failover) comes back.
  pg_atomic_init_u64(&shared->next_token, static_cast<uint64>(GetCurrentTimestamp()));
  for (int i = 0; i < shared->size; ++i) pg_atomic_init_u64(&shared->tokens[i], 0);
}

}  // namespace idem::session_binding
