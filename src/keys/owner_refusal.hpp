// Why an owner's fenced write matched no row: the key is missing, a newer
// claim owns it (P4012), or this fence does not own it now. Shared by the
// outcomes (outcome.cpp) and release (release.cpp).
#pragma once

#include "base/arguments.hpp"
#include "pg/spi_session.hpp"

namespace idem {

// Looks at the key once more in `session` ($1 scope, $2 key of params) and
// raises: not_owned_sqlstate when the key is missing or not owned by
// `fence`, P4012 when a newer fence owns it. Finishes the session first.
// The detail names the caller's fence and the key's status, never the key's
// fence: an error must not hand the current fence to whoever asks (a fence
// orders owners, it is no secret and authorises nothing; docs/security.md).
[[noreturn]] void explain_refusal(SpiSession *session, const KeyName &name, int64 fence,
                                  Datum *params, const char *nulls,
                                  const char *not_owned_sqlstate, const char *operation);

}  // namespace idem
