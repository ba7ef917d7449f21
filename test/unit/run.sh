#!/usr/bin/env bash
# Builds and runs every test/unit/*_test.cpp twice: with g++ (warnings are
# errors) and with clang++-14 under AddressSanitizer + UndefinedBehaviorSanitizer
# (any report fails the run). Usage: test/unit/run.sh [build-dir]
# Last line printed: "unit: N passed, N failed", counting gtest tests of both builds.
set -euo pipefail

# Sources without Postgres headers that unit tests link against; a file that
# does not exist (yet) is skipped. hashing.cpp is pure too, but needs OpenSSL
# and has no test of its own here; boundary_check.sh compiles it. The
# statements' texts are the Makefile's STATEMENT_TEXT_SOURCES.
PURE_SOURCES=(src/pure/batch_pace.cpp src/pure/jcs.cpp src/pure/jcs_number.cpp src/pure/classify.cpp src/pure/row_invariants.cpp
              src/pure/interval_rule.cpp src/pure/scope_prefix.cpp src/pure/statement_text.cpp)

GTEST_DIR=/usr/src/googletest/googletest
WARNINGS=(-Wall -Wextra -Werror)
GCC_FLAGS=(-std=c++17 -O1 -pthread -Isrc)
CLANG_FLAGS=(-std=c++17 -O1 -g -Isrc -fsanitize=address,undefined -fno-sanitize-recover=all
             -fno-omit-frame-pointer -pthread)
# abort_on_error: a report ends the process with a non-zero status even when
# the report comes at exit (leaks).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${1:-build/unit}
mkdir -p "$build"
build=$(cd "$build" && pwd)

sources=()
for s in "${PURE_SOURCES[@]}"; do
  if [[ -f $s ]]; then sources+=("$s"); fi
done
shopt -s nullglob
tests=(test/unit/*_test.cpp)
shopt -u nullglob

passed=0
failed=0

# gtest and gtest_main, compiled with the mode's flags (but not our warning
# flags: it is not our code) and kept until those flags change.
build_gtest() {
  local cxx=$1 dir=$2; shift 2
  local stamp="$dir/gtest/flags" want="$cxx $*"
  if [[ -f $dir/gtest/gtest-all.o && -f $dir/gtest/gtest_main.o && -f $stamp && $(<"$stamp") == "$want" ]]; then
    return 0
  fi
  mkdir -p "$dir/gtest"
  echo "building gtest ($(basename "$dir"))"
  "$cxx" "$@" -I"$GTEST_DIR" -c "$GTEST_DIR/src/gtest-all.cc" -o "$dir/gtest/gtest-all.o"
  "$cxx" "$@" -I"$GTEST_DIR" -c "$GTEST_DIR/src/gtest_main.cc" -o "$dir/gtest/gtest_main.o"
  echo "$want" >"$stamp"
}

# Adds the counts of one finished test binary; a binary that ended badly
# without a failed test (sanitizer report at exit, crash before the report
# was written) counts as one failure more.
count_results() {
  local report=$1 status=$2 counts p f
  if [[ -f $report ]] && counts=$(python3 - "$report" <<'EOF'
import json, sys
passed = failed = 0
for suite in json.load(open(sys.argv[1]))["testsuites"]:
    for t in suite["testsuite"]:
        if t.get("failures"):
            failed += 1
        elif t.get("status") == "RUN" and t.get("result", "COMPLETED") == "COMPLETED":
            passed += 1
print(passed, failed)
EOF
  ); then
    read -r p f <<<"$counts"
  else
    p=0 f=0
  fi
  if [[ $status -ne 0 && $f -eq 0 ]]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
}

run_mode() {
  local mode=$1 cxx=$2; shift 2
  local flags=("$@") dir="$build/$mode"
  mkdir -p "$dir"
  build_gtest "$cxx" "$dir" "${flags[@]}"

  local objects=() src obj
  for src in "${sources[@]}"; do
    obj="$dir/$(basename "${src%.cpp}").o"
    if ! "$cxx" "${flags[@]}" "${WARNINGS[@]}" -c "$src" -o "$obj"; then
      echo "FAILED to compile $src ($mode)"
      failed=$((failed + ${#tests[@]}))
      return
    fi
    objects+=("$obj")
  done

  local test name bin status
  for test in "${tests[@]}"; do
    name=$(basename "${test%.cpp}")
    bin="$dir/$name"
    rm -f "$bin" "$bin.json"
    if ! "$cxx" "${flags[@]}" "${WARNINGS[@]}" "$test" "${objects[@]}" \
        "$dir/gtest/gtest-all.o" "$dir/gtest/gtest_main.o" -o "$bin"; then
      echo "FAILED to build $test ($mode)"
      failed=$((failed + 1))
      continue
    fi
    echo "running $name ($mode)"
    status=0
    "$bin" --gtest_brief=1 --gtest_output="json:$bin.json" || status=$?
    count_results "$bin.json" "$status"
  done
}

if [[ ${#tests[@]} -eq 0 ]]; then
  echo "no test/unit/*_test.cpp found"
  failed=1
else
  run_mode gcc g++ "${GCC_FLAGS[@]}"
  run_mode clang-asan-ubsan clang++-14 "${CLANG_FLAGS[@]}"
fi

# The compile-time checks of the error boundary (need pg_config for the headers).
if boundary=$(bash test/unit/boundary_check.sh "$build"); then :; fi
echo "$boundary"
line=$(tail -n 1 <<<"$boundary")
if [[ $line =~ ^boundary:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
  passed=$((passed + BASH_REMATCH[1]))
  failed=$((failed + BASH_REMATCH[2]))
else
  failed=$((failed + 1))
fi

echo "unit: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
