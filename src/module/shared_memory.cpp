#include "module/shared_memory.hpp"

#include "pg/guard.hpp"
#include "waits/request_durations.hpp"
#include "waits/session_binding.hpp"
#include "base/stats.hpp"
#include "waits/wait_slots.hpp"
#include "worker/worker_status.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace idem {

namespace {

// One named region each: ShmemInitStruct finds a region again by its name
// (in EXEC_BACKEND children) and makes it anew after a crash restart, when
// found is false again and attach must initialise it.
struct Region {
  const char *name;
  Size (*size)();
  void (*attach)(void *memory, bool found);
};

const Region regions[] = {
    {"idem counters", stats::shared_size, stats::attach_shared},
    {"idem worker status", worker_status_shared_size, attach_worker_status},
    {"idem request durations", request_durations::shared_size, request_durations::attach_shared},
    {"idem wait slots", wait_slots::shared_size, wait_slots::attach_shared},
    {"idem session registry", session_binding::shared_size, session_binding::attach_shared},
};

shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

// In the postmaster, before shared memory is created.
void request_regions() {
  if (previous_request_hook != nullptr) previous_request_hook();
  Size total = 0;
  // ShmemInitStruct aligns every allocation to a cache line.
  for (const Region &region : regions) total = add_size(total, CACHELINEALIGN(region.size()));
  RequestAddinShmemSpace(total);
}

// In the postmaster once shared memory exists (again after a crash
// restart), and in every EXEC_BACKEND child.
void attach_regions() {
  if (previous_startup_hook != nullptr) previous_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  for (const Region &region : regions) {
    bool found = false;
    void *memory = ShmemInitStruct(region.name, region.size(), &found);
    region.attach(memory, found);
  }
  LWLockRelease(AddinShmemInitLock);
}

}  // namespace

}  // namespace idem

// Hooks are called by Postgres: C linkage, each body behind the guard.
extern "C" {
static void idem_shmem_request(void) {
  idem::run_guarded([]() -> Datum {
    idem::request_regions();
    return 0;
  });
}

static void idem_shmem_startup(void) {
  idem::run_guarded([]() -> Datum {
    idem::attach_regions();
    return 0;
  });
}
}

namespace idem {

void install_shared_memory_hooks() {
  if (!process_shared_preload_libraries_in_progress) return;
  previous_request_hook = shmem_request_hook;
  shmem_request_hook = idem_shmem_request;
  previous_startup_hook = shmem_startup_hook;
  shmem_startup_hook = idem_shmem_startup;
}

}  // namespace idem
