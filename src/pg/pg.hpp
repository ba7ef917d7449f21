// idem's door to the Postgres headers: postgres.h first, then the headers
// most files need, inside extern "C" (they are C, and their functions must
// keep C linkage inside this C++ library), then compat.hpp and the rules
// below. A file that needs a header of its own (shared memory, latches,
// background workers, a catalog's columns) includes it itself, in
// extern "C", after an idem header that brings in this one, so postgres.h
// always comes first and the poisoned names stay poisoned;
// scripts/check-includes.pl refuses a Postgres header before that.
#pragma once

// A pure C++ file (src/pure/pure.hpp) must never reach the Postgres headers.
#ifdef IDEM_PURE_TRANSLATION_UNIT
#error "pg.hpp included in a pure C++ translation unit: move the Postgres call out of it"
#endif

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "postmaster/bgworker.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "pg/compat.hpp"

#include <type_traits>

// SPI hands out memory that SPI_finish frees. Only spi_session.cpp connects,
// runs and reads results, copying what callers keep into their own memory
// before it finishes, and only statements.cpp prepares; everywhere else these
// names do not compile, so a string read from a result cannot outlive it.
#ifndef IDEM_SPI_SESSION_IMPLEMENTATION
#pragma GCC poison SPI_connect SPI_connect_ext SPI_finish SPI_execute SPI_exec SPI_execp
#pragma GCC poison SPI_execute_plan SPI_execute_with_args SPI_execute_extended SPI_execute_snapshot
#pragma GCC poison SPI_execute_plan_extended SPI_execute_plan_with_paramlist
#pragma GCC poison SPI_tuptable SPI_processed SPI_getvalue SPI_getbinval SPI_copytuple
#pragma GCC poison SPI_datumTransfer SPI_palloc SPI_returntuple SPI_cursor_open
#endif
#ifndef IDEM_KEPT_STATEMENTS_IMPLEMENTATION
#pragma GCC poison SPI_prepare SPI_prepare_params SPI_prepare_extended SPI_keepplan
#pragma GCC poison SPI_saveplan
#endif

// For structs that live in frames Postgres may longjmp through (every frame
// that calls Postgres): a longjmp skips destructors, so they must have none
// that matters (docs/internals.md, "The error boundary").
#define IDEM_LONGJMP_SAFE(Type)                                     \
  static_assert(std::is_trivially_destructible_v<Type>,            \
                #Type " lives in frames Postgres may longjmp through, " \
                "so it must be trivially destructible")

namespace idem {

// errcode() for a SQLSTATE given as text (the names of errors.hpp), inside
// ereport(): ereport(ERROR, (errcode_of(sqlstate::bad_argument), errmsg(...))).
inline int errcode_of(const char *sqlstate) {
  return errcode(MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]));
}

// The 0-based index of column `name` in `desc`, or -1: by name, so that a
// column added or dropped by a later upgrade script cannot shift what idem
// reads (key_probe.cpp, row_check.cpp).
inline int attribute_index(TupleDesc desc, const char *name) {
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attribute = TupleDescAttr(desc, i);
    if (!attribute->attisdropped && strcmp(NameStr(attribute->attname), name) == 0) return i;
  }
  return -1;
}

// A composite datum's tuple as a HeapTupleData (no table, no position), for
// heap_getattr or a tuplestore.
inline HeapTupleData heap_tuple_of(HeapTupleHeader header) {
  HeapTupleData tuple;
  tuple.t_len = HeapTupleHeaderGetDatumLength(header);
  ItemPointerSetInvalid(&tuple.t_self);
  tuple.t_tableOid = InvalidOid;
  tuple.t_data = header;
  return tuple;
}

}  // namespace idem
