// idem.bind_lock_to_session (docs/design.md, "Losing a lock with the
// session"): a claim that grants ownership stores a token of its session in
// the row (bound_session); while the token is live in this server's registry
// the lock holds as usual, and once it is not, the key is stale at once.
//
// The registry lives in shared memory, one token per live session that ever
// bound a key; a session clears its own at exit (before_shmem_exit: a
// disconnect, a dropped client, pg_terminate_backend). A crashed backend
// makes the postmaster reinitialise shared memory, and a promoted standby
// has its own: either way no earlier token is live any more. Tokens are
// never reused: they count up from the server start's clock in microseconds.
//
// Connection poolers in transaction mode hand one server session to many
// clients: binding there ties a key to the pooler's session, not the
// client's. README.md, "Binding a lock to the session", says so.
#pragma once

#include "pg/pg.hpp"

namespace idem::session_binding {

// True when idem.bind_lock_to_session is on for this call.
bool wanted();

// This session's token, registered on first use. Raises 55000 without the
// preload (there is no registry to hold it).
int64 my_token();

// Remembers a key stripe (wait_slots.hpp) this session bound, to wake its
// waiters when the session ends.
void note_bound_stripe(uint32 stripe);

// Whether a token stored in a row belongs to a live session of this server.
// On a hot standby every token counts as live: no claim there may take over.
bool alive(int64 token);

// The live tokens as a bigint[] (the sweeper's), in the current memory context.
Datum live_tokens_array();

// Whether the token is in the registry now (the sweeper's check under its
// row lock): false without the preload, where no session can hold one.
bool registered(int64 token);

// The registry in shared memory (shared_memory.cpp).
Size shared_size();
void attach_shared(void *memory, bool found);

}  // namespace idem::session_binding
