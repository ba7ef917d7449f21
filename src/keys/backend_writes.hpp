// A count, per backend, of the statements idem has run that may have written
// to its tables: every kept statement (SPI runs them all read-write, and a
// SELECT of idem.purge_consumed writes too) and every direct table write.
// The claim memo (statement_memo.hpp) reuses an answer only while this count
// has not moved, so any write by idem in this backend (a mark, a recovery
// point, extend_lock, evict, force_expire, a purge, a sweep, another claim
// that took a key) ends the reuse of every answer made before it.
#pragma once

#include <cstdint>

namespace idem::backend_writes {

inline std::uint64_t count = 0;

// Called before each statement or direct write runs: one that fails counts.
// spi_run calls it through its statement-run hook (pg/spi_session.hpp), set
// from _PG_init; the direct writes (maintenance.cpp) call it themselves.
inline void note() { ++count; }

inline std::uint64_t current() { return count; }

}  // namespace idem::backend_writes
