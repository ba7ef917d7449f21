// Marks a translation unit as pure C++: it may not see a Postgres header.
//
// Pure files (canonical JSON, claim classification, hashing, the key table's
// invariants) own memory with std::string and std::vector and report failure
// by throwing idem::Error; a Postgres call there could longjmp past their
// destructors (guard.hpp). So
// the compiler refuses any Postgres header in them, whatever the include order:
//   - included first, as every pure .cpp does, this file #errors if a
//     Postgres header came before it (POSTGRES_H, POSTGRES_FE_H or C_H is
//     defined: c.h is behind every Postgres header);
//   - and it poisons identifiers that every Postgres header defines or
//     uses, so a Postgres header included after it fails to compile:
//     pg_config.h, which c.h includes first, #defines PG_VERSION_NUM, and a
//     #define of a poisoned name is an error (GCC and clang alike). Datum,
//     palloc, ereport and elog are poisoned so pure code cannot name them
//     either;
//   - pg.hpp, idem's one include of the Postgres headers, #errors by name
//     when IDEM_PURE_TRANSLATION_UNIT is defined, for the clearest message.
// The pure headers (errors.hpp, classify.hpp, jcs.hpp, hashing.hpp) are
// shared with Postgres-calling files, so they cannot carry the mark
// themselves; they are checked through the pure .cpp files that include
// them. test/unit/boundary_check.sh proves that both orders fail to compile.
#pragma once

#define IDEM_PURE_TRANSLATION_UNIT 1

#if defined(POSTGRES_H) || defined(POSTGRES_FE_H) || defined(C_H)
#error "a Postgres header was included in a pure C++ translation unit (src/pure/pure.hpp)"
#endif

#pragma GCC poison PG_VERSION_NUM Datum palloc ereport elog
