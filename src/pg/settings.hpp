// The key store's idem.* configuration parameters (the worker's are in
// worker/worker_settings.hpp, the inbox's and outbox's in
// messages/message_maintenance.hpp).
#pragma once

namespace idem {

struct Settings {
  int lock_timeout_ms;  // idem.lock_timeout
  int retention_s;      // idem.retention; -1: keys never expire
  bool bind_lock_to_session;  // idem.bind_lock_to_session (session_binding.hpp)
};

extern Settings settings;

// Defines the key-store settings; called from _PG_init.
void define_key_store_settings();

}  // namespace idem
