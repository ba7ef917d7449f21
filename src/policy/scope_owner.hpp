// Scopes owned by roles (idem.scope_owner, docs/contract.md "Version 1.2: scopes owned by
// roles"): a per-backend cache of the table, and the check every call that
// reads or writes a scope's keys, a consumer's messages or a scope's outbox
// events makes right after its arguments are checked, before it reads any
// row, so a refusal says nothing about whether a key or message exists.
//
// The calling role is the role the session runs as (GetOuterUserId: SET
// ROLE's, else the login's); idem's own SECURITY DEFINER switch does not
// change it. It may use a scope when it is a member (superusers are) of the
// owner of the longest scope_prefix the scope starts with; when no row
// covers the scope, always, unless idem.require_scope_owner is on, and then
// only as a member of the extension's owner (the owner of idem.scope_owner).
// Without the table (a 1.1 schema under this library) every scope is
// allowed and the setting does nothing.
#pragma once

#include "pg/pg.hpp"
#include "pure/errors.hpp"

namespace idem {

// Raises 42501 naming the scope when the calling role may not use it.
void require_scope_owner(const text *scope, SourceLocation where = SourceLocation::here());

// The same rule as a boolean.
bool may_use_scope(const text *scope);

// Brings the cache up to date (one SPI query, in a session of its own, only
// after idem.scope_owner changed); a caller about to run a statement that
// calls idem.may_use_scope row by row runs it first. Returns whether the
// table exists (false: a 1.1 schema).
bool scope_owners_loaded();

// idem.run_maintenance runs the worker's completer round in the caller's
// backend (completer_call.cpp); its calls are judged as the worker's are:
// the claim of a key for its completer as the bootstrap superuser (the role
// the worker connects as), the completer's own calls as the completer's
// owner (the role its process connects as). judge_as pushes a role,
// judge_end pops it and goes back to the role judged before (the calling
// role when none was): a judgement inside another never ends the outer one.
// An abort of the (sub)transaction that pushed a role pops it too.
void judge_as(Oid role);
void judge_end();

}  // namespace idem
