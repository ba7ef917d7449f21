#!/usr/bin/env bash
# Proves the compile-time boundary of src/pure.hpp: a pure translation unit
# that sees a Postgres header, before or after the mark, or through pg.hpp,
# must not compile, while the real pure files compile with the Postgres
# headers on the include path (so nothing but the mark keeps them out).
# Usage: test/unit/purity_check.sh [build-dir]. Last line: "purity: N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${1:-build/unit}
mkdir -p "$build/purity"
build=$(cd "$build/purity" && pwd)
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
  echo "purity: 0 passed, 1 failed"
  exit 1
fi
PURE_SOURCES=(src/jcs.cpp src/classify.cpp src/hashing.cpp)

passed=0
failed=0
compile() {  # compiler source -> status
  "$1" -std=c++17 -fsyntax-only -I"$root/src" -I"$server_include" "$2" 2>"$build/last.err"
}

# name, then the lines of a translation unit that must be refused.
must_fail() {
  local name=$1; shift
  local src="$build/$name.cpp" cxx
  printf '%s\n' "$@" >"$src"
  for cxx in g++ clang++-14; do
    if compile "$cxx" "$src"; then
      echo "FAILED: $name compiled with $cxx, the pure boundary did not hold"
      failed=$((failed + 1))
    elif ! grep -qiE 'poison|pure' "$build/last.err"; then
      echo "FAILED: $name ($cxx) was refused for another reason:"; cat "$build/last.err"
      failed=$((failed + 1))
    else
      passed=$((passed + 1))
    fi
  done
}

must_fail postgres_after_mark '#include "pure.hpp"' 'extern "C" {' '#include "postgres.h"' '}'
must_fail postgres_before_mark 'extern "C" {' '#include "postgres.h"' '}' '#include "pure.hpp"'
must_fail fmgr_after_mark '#include "pure.hpp"' '#include "jcs.hpp"' 'extern "C" {' '#include "fmgr.h"' '}'
must_fail pg_hpp_after_mark '#include "pure.hpp"' '#include "pg.hpp"'
must_fail names_a_postgres_call '#include "pure.hpp"' 'void *f(unsigned long n);' \
  'void *g() { return f(1); }' 'void *h() { return palloc(1); }'

for src in "${PURE_SOURCES[@]}"; do
  if compile g++ "$src"; then
    passed=$((passed + 1))
  else
    echo "FAILED: pure file $src does not compile:"; cat "$build/last.err"
    failed=$((failed + 1))
  fi
  if head -n 20 "$src" | grep -q '^#include "pure.hpp"'; then
    passed=$((passed + 1))
  else
    echo "FAILED: $src does not start by including pure.hpp"
    failed=$((failed + 1))
  fi
done

echo "purity: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
