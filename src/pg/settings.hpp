// The key store's idem.* configuration parameters (the worker's are in
// worker/worker_settings.hpp, the inbox's and outbox's in
// messages/message_maintenance.hpp).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// The one rule of every retention setting in seconds (idem.retention,
// idem.inbox_retention, idem.outbox_retention), for their check hooks: -1
// keeps rows forever, and 0, which would expire them at once, is refused
// with the errdetail `detail`. (Not a template on the detail: two
// translation units' internal detail strings would give two instantiations
// one mangled name, and the linker would keep one of them for both.)
bool retention_is_acceptable(int value, const char *detail);

struct Settings {
  int lock_timeout_ms;  // idem.lock_timeout
  int retention_s;      // idem.retention; -1: keys never expire
  bool bind_lock_to_session;  // idem.bind_lock_to_session (session_binding.hpp)
  bool require_scope_owner;   // idem.require_scope_owner (policy/scope_owner.hpp)
};

extern Settings settings;

// Defines the key-store settings; called from _PG_init.
void define_key_store_settings();

}  // namespace idem
