#!/usr/bin/env bash
# Proves that the compile-time checks of the C++/Postgres boundary
# (docs/internals.md, "The error boundary") refuse what they must:
#   - src/pure/pure.hpp: a pure translation unit that sees a Postgres header,
#     before or after the mark, or through pg.hpp, must not compile, while the
#     real pure files compile with the Postgres headers on the include path
#     (so nothing but the mark keeps them out);
#   - guard.hpp: a run_guarded body that captures something with a
#     destructor, and IDEM_LONGJMP_SAFE on such a struct, must not compile;
#   - pg.hpp: a raw SPI result call outside spi_session.cpp must not compile.
# Usage: test/unit/boundary_check.sh [build-dir]. Last line: "boundary: N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${1:-build/unit}
mkdir -p "$build/boundary"
build=$(cd "$build/boundary" && pwd)
# The server headers: pg_config's, or, for a private copy of an installation
# that has no headers of its own (run-tests), the system's of the same major.
pg_config=${PG_CONFIG:-pg_config}
server_include=$("$pg_config" --includedir-server)
if [[ ! -f $server_include/postgres.h ]]; then
  major=$("$pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
  server_include=/usr/include/postgresql/$major/server
fi
if [[ ! -f $server_include/postgres.h ]]; then
  echo "FAILED: no PostgreSQL server headers found (pg_config: $pg_config)"
  echo "boundary: 0 passed, 1 failed"
  exit 1
fi
PURE_SOURCES=(src/pure/jcs.cpp src/pure/jcs_number.cpp src/pure/classify.cpp src/pure/hashing.cpp src/pure/row_invariants.cpp
              src/pure/statement_text.cpp src/pure/batch_pace.cpp src/pure/interval_rule.cpp
              src/pure/policy_table.cpp src/pure/scope_prefix.cpp)

passed=0
failed=0
compile() {  # compiler source -> status
  "$1" -std=c++17 -fsyntax-only -I"$root/src" -I"$server_include" "$2" 2>"$build/last.err"
}

# name, a pattern the compiler's refusal must match, then the lines of a
# translation unit that must be refused.
must_fail() {
  local name=$1 reason=$2; shift 2
  local src="$build/$name.cpp" cxx
  printf '%s\n' "$@" >"$src"
  for cxx in g++ clang++-14; do
    if compile "$cxx" "$src"; then
      echo "FAILED: $name compiled with $cxx, the pure boundary did not hold"
      failed=$((failed + 1))
    elif ! grep -qiE "$reason" "$build/last.err"; then
      echo "FAILED: $name ($cxx) was refused for another reason:"; cat "$build/last.err"
      failed=$((failed + 1))
    else
      passed=$((passed + 1))
    fi
  done
}

# name, then the lines of a translation unit that must compile.
must_compile() {
  local name=$1; shift
  local src="$build/$name.cpp"
  printf '%s\n' "$@" >"$src"
  if compile g++ "$src"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name does not compile:"; cat "$build/last.err"
    failed=$((failed + 1))
  fi
}

poisoned='poison'
must_fail postgres_after_mark "$poisoned" '#include "pure/pure.hpp"' 'extern "C" {' '#include "postgres.h"' '}'
must_fail postgres_before_mark 'pure C\+\+ translation unit' 'extern "C" {' '#include "postgres.h"' '}' \
  '#include "pure/pure.hpp"'
must_fail fmgr_after_mark "$poisoned" '#include "pure/pure.hpp"' '#include "pure/jcs.hpp"' 'extern "C" {' \
  '#include "fmgr.h"' '}'
must_fail pg_hpp_after_mark 'pure C\+\+ translation unit' '#include "pure/pure.hpp"' '#include "pg/pg.hpp"'
must_fail names_a_postgres_call "$poisoned" '#include "pure/pure.hpp"' 'void *h() { return palloc(1); }'

# The guard and the longjmp-safe structs.
destructor='trivially destructible'
must_compile guard_trivial_capture '#include "pg/guard.hpp"' \
  'Datum f(FunctionCallInfo fcinfo) { return idem::run_guarded([fcinfo]() -> Datum { return PG_GETARG_DATUM(0); }); }'
must_fail guard_string_capture "$destructor" '#include <string>' '#include "pg/guard.hpp"' \
  'Datum f(std::string s) { return idem::run_guarded([s]() -> Datum { return s.size(); }); }'
must_fail longjmp_safe_string "$destructor" '#include <string>' '#include "pg/pg.hpp"' \
  'struct Row { std::string text; };' 'IDEM_LONGJMP_SAFE(Row);'

# Raw SPI results outside spi_session.cpp.
must_compile spi_session_user '#include "pg/spi_session.hpp"' \
  'char *f(idem::SpiSession *s) { return idem::spi_copy_text(s, 0, 1); }'
must_fail raw_spi_getvalue "$poisoned" '#include "pg/pg.hpp"' \
  'char *f() { return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1); }'
must_fail raw_spi_finish "$poisoned" '#include "pg/statements.hpp"' 'void f() { SPI_finish(); }'

for src in "${PURE_SOURCES[@]}"; do
  if compile g++ "$src"; then
    passed=$((passed + 1))
  else
    echo "FAILED: pure file $src does not compile:"; cat "$build/last.err"
    failed=$((failed + 1))
  fi
  if head -n 20 "$src" | grep -q '^#include "pure/pure.hpp"'; then
    passed=$((passed + 1))
  else
    echo "FAILED: $src does not start by including pure.hpp"
    failed=$((failed + 1))
  fi
done

echo "boundary: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
