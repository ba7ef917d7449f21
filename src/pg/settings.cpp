#include "pg/settings.hpp"

#include "pg/pg.hpp"

namespace idem {

Settings settings = {300000, 86400, false, false};

bool retention_is_acceptable(int value, const char *detail) {
  if (value != 0) return true;
  GUC_check_errdetail("%s", detail);
  return false;
}

namespace {
bool check_key_retention(int *value, void **, GucSource) {
  return retention_is_acceptable(
      *value, "idem.retention must be positive, or -1 for keys that never expire.");
}
}  // namespace

void define_key_store_settings() {
  DefineCustomIntVariable(
      "idem.lock_timeout", "How long a claim owns its key before others may take it over.",
      "Used when claim_idempotency_key is called with lock_timeout NULL.",
      &settings.lock_timeout_ms, 300000, 1, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.retention", "How long a key is kept after the claim that created it.",
      "Used when claim_idempotency_key is called with retention NULL; -1 keeps keys forever.",
      &settings.retention_s, 86400, -1, INT_MAX, PGC_USERSET, GUC_UNIT_S,
      check_key_retention, nullptr, nullptr);
  DefineCustomBoolVariable(
      "idem.bind_lock_to_session", "Whether a claim's lock ends with the claiming session.",
      "When on, a key whose owning session ended is stale at once. Do not use behind a "
      "transaction-pooling connection pooler.",
      &settings.bind_lock_to_session, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  // PGC_SUSET: the setting protects tenants from each other, so a tenant's
  // session must not turn it off.
  DefineCustomBoolVariable(
      "idem.require_scope_owner",
      "Whether a scope no row of idem.scope_owner covers is refused to all but the "
      "extension's owner.",
      "When off, such a scope is open to every role that may call idem's functions.",
      &settings.require_scope_owner, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
}

}  // namespace idem
