// One row of an idem table read by its primary key through the key's index,
// without SPI: the read a replay is made of (docs/internals.md, "Key
// probes"). SPI would plan nothing here (the plan is kept) but still starts
// and ends an executor, pushes a snapshot and forms a result tuple for every
// call; a replay of consume_once is that one read and nothing else.
//
// Public access-method calls only (table_open, index_beginscan,
// index_getnext_slot), the way Postgres's own catalog lookups read by key.
// The row is read as the next statement of the calling function would see
// it: after the transaction's own earlier commands, in a snapshot taken now
// under READ COMMITTED and in the transaction's snapshot under REPEATABLE
// READ or SERIALIZABLE (whose predicate locks the index and heap take
// themselves).
#pragma once

#include "pg/catalog_cache.hpp"
#include "pg/pg.hpp"
#include "pure/statement_text.hpp"

namespace idem {

// The row of `table` whose two-column text primary key `key_index` is
// (first, second). Returns false when there is none; else fills values[i]
// and nulls[i] for each of the `column_count` columns named in `columns`,
// copied into `into` (the caller's context: a caller connected to SPI passes
// its session's caller_context, which outlives spi_finish).
//
// Where `table` is a Citus table (pg/citus.hpp) the relation on this node is
// an empty shell: the row is read instead by `on_citus`, a kept SELECT of
// the same columns, in the same order, by the same two-column key ($1, $2),
// which Citus routes to the shard that holds the key (on this node when the
// call was delegated there).
bool probe_by_key(catalog_cache::IdemRelation table, catalog_cache::IdemRelation key_index,
                  const text *first, const text *second, int column_count,
                  const char *const columns[], Statement on_citus, MemoryContext into,
                  Datum values[], bool nulls[]);

// Whether two texts are the same bytes: how a probed key or hash column is
// compared with the caller's (the key columns use the database's default
// collation, which is deterministic, so '=' means the same bytes).
bool same_text(const text *a, const text *b);

}  // namespace idem
