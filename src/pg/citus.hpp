// Whether one of idem's tables is a Citus table on this node
// (docs/internals.md, "On Citus"). Citus keeps such a table's rows in its
// shards (idem.<table>_<shardid>, on the node that holds each); the table
// itself is an empty shell there, which a direct read (the key probe, the
// purge's in-place delete) must never take for the table. Statements run
// through SPI are Citus's to route.
//
// The answer is read from Citus's catalog (pg_dist_partition) once and kept
// per backend until a relcache invalidation of the table: Citus sends one
// when it distributes or undistributes a table, and a server without Citus
// answers false after one name lookup.
#pragma once

#include "pg/catalog_cache.hpp"
#include "pg/pg.hpp"

namespace idem::citus {

bool is_citus_table(catalog_cache::IdemRelation relation);

// Whether any of idem's tables is a Citus table on this node.
bool routes_idem_tables();

}  // namespace idem::citus
