#!/usr/bin/env bash
# The layering check of src/ (scripts/check-includes.pl): it passes on the
# tree, and it fails, naming the line, on copies of src/ with a climbing
# include, a folder without a rank, a Postgres header before pg/pg.hpp and
# a version test outside src/pg/compat.hpp planted in them; an include that
# points down passes.
# Usage: test/includes.sh [work-dir]. Last line: "includes: N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
work=${1:-build/includes}
mkdir -p "$work"
work=$(cd "$work" && pwd)
check=scripts/check-includes.pl
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { echo "FAILED: $*"; failed=$((failed + 1)); }

# The tree as it is.
if perl "$check" >"$work/tree.log" 2>&1; then
  pass
else
  fail "src/ has includes that climb:"; cat "$work/tree.log"
fi

# name, a file under src/, a line added at its top, and the pattern the
# check's output must match (empty: the check must pass).
planted() {
  local name=$1 file=$2 line=$3 want=$4 copy="$work/$1" status=0
  rm -rf "$copy"
  mkdir -p "$copy"
  cp -R src "$copy/src"
  mkdir -p "$(dirname "$copy/$file")"
  { printf '%s\n' "$line"; [ -f "$copy/$file" ] && cat "$copy/$file"; } >"$copy/$file.new"
  mv "$copy/$file.new" "$copy/$file"
  perl "$check" --root "$copy" >"$copy.log" 2>&1 || status=$?
  if [ -z "$want" ]; then
    if [ $status -eq 0 ]; then pass; else fail "$name: the check refused it:"; cat "$copy.log"; fi
  elif [ $status -ne 1 ]; then
    fail "$name: the check exited with $status, not 1:"; cat "$copy.log"
  elif ! grep -qE "$want" "$copy.log"; then
    fail "$name: the check did not name the problem ($want):"; cat "$copy.log"
  else
    pass
  fi
  rm -rf "$copy"
}

# pg/ is below worker/: the climbing line is listed as file:line -> target.
planted pg_includes_worker src/pg/guard.cpp '#include "worker/worker_status.hpp"' \
  '^src/pg/guard\.cpp:1 -> worker/worker_status\.hpp: climbs'
# A header climbs as a source file does.
planted pure_includes_pg src/pure/jcs.hpp '#include "pg/pg.hpp"' \
  '^src/pure/jcs\.hpp:1 -> pg/pg\.hpp: climbs'
# A new folder must be given its rank before anything lives in it.
planted unranked_folder src/newroom/x.cpp '#include "pg/pg.hpp"' \
  '^src/newroom/x\.cpp: in a folder without a rank'
# postgres.h (through pg/pg.hpp) comes before any other Postgres header.
planted postgres_header_first src/keys/claim_or_wait.cpp '#include "utils/resowner.h"' \
  '^src/keys/claim_or_wait\.cpp:1 -> utils/resowner\.h: a Postgres header before'
# Version tests belong in src/pg/compat.hpp.
planted version_test src/keys/claim.cpp '#if PG_VERSION_NUM >= 170000' \
  '^src/keys/claim\.cpp:1: a PostgreSQL version test outside'
# Down is allowed: the module includes the worker.
planted module_includes_worker src/module/module.cpp '#include "worker/worker_status.hpp"' ''

echo "includes: $passed passed, $failed failed"
[ $failed -eq 0 ]
