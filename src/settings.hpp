// idem.* configuration parameters.
#pragma once

namespace idem {

struct Settings {
  int lock_timeout_ms;  // idem.lock_timeout
  int retention_s;      // idem.retention; -1: keys never expire
};

extern Settings settings;

// Defines the key-store settings; called from _PG_init.
void define_key_store_settings();

}  // namespace idem
