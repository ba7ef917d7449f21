// idem's own catalog objects, resolved by name once per backend: the
// relations C++ code opens or checks by OID, and whether the key table has
// 1.1's bound_session column. The caches built on them (the key probe's
// column numbers, the scope policies and owners, the enum labels claim.cpp
// learns) ask here whether what they kept still holds. One relcache callback and two
// syscache callbacks (pg_namespace, pg_enum), registered here at the first
// use, are the backend's only invalidation path for all of them.
#pragma once

#include "pg/pg.hpp"

namespace idem::catalog_cache {

enum class IdemRelation {
  key_table,              // idem.idempotency_request
  key_table_pkey,         // its primary key's index
  consumed_message,       // idem.consumed_message
  consumed_message_pkey,  // its primary key's index
  scope_policy,           // idem.scope_policy (1.1)
  scope_owner,            // idem.scope_owner (1.2)
  outbox_event,           // idem.outbox_event (1.1)
  fence_seq,              // idem.fence_seq
  fence_jump_seq,         // idem.fence_jump_seq (1.3)
};

// The relation's name in schema idem.
const char *relation_name(IdemRelation relation);

// The relation's OID, or InvalidOid when it or the schema idem is not there
// (a missing relation is looked up again at the next call). A resolved OID
// is kept until an invalidation of the relation, of its table or key
// index, of every relation, or of any schema.
Oid relation_oid(IdemRelation relation);

// A count that grows at every relcache invalidation that may concern the
// relation: of it, of its table or key index, of every relation, or of any
// relation at all while the relation was found missing (that one may be its
// creation). A cache built on the relation keeps what it read while the
// count stays the one it read before.
uint64 relation_changes(IdemRelation relation);

// Whether idem.idempotency_request has 1.1's bound_session column (false
// when there is no such table), kept with the table's OID.
bool key_table_has_binding();

// A count that grows at every change of pg_enum: a re-created enum type has
// new label OIDs, so caches of label OIDs start again.
uint64 enum_changes();

}  // namespace idem::catalog_cache
