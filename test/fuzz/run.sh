#!/usr/bin/env bash
# Builds the libFuzzer target for the JSON canonicalizer and fuzzes it for a
# bounded time (FUZZ_SECONDS, default 30), starting from a copy of
# test/fuzz/corpus so the repository is left untouched.
# Usage: test/fuzz/run.sh [build-dir]. Last line: "fuzz: N passed, N failed".
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${1:-build/fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)
seconds=${FUZZ_SECONDS:-30}

clang++-14 -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -Isrc test/fuzz/jcs_fuzz.cpp src/pure/jcs.cpp \
  src/pure/jcs_number.cpp -o "$build/jcs_fuzz"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp test/fuzz/corpus/* "$work/"

log="$build/jcs_fuzz.log"
status=0
# -timeout: an input taking 10 s is a hang, reported like a crash.
"$build/jcs_fuzz" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$build/" "$work" >"$log" 2>&1 || status=$?

# The final stats, or after a crash the last progress line ("#1234 ...").
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [[ -z $runs ]]; then runs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#'); fi
echo "fuzz: ${runs:-0} executions in up to ${seconds}s (log: $log)"

if [[ $status -ne 0 ]]; then
  tail -n 40 "$log"
  echo "fuzz: crash found, inputs saved as $build/crash-* / $build/timeout-* / $build/leak-*"
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi
echo "fuzz: no crash"
echo "fuzz: 1 passed, 0 failed"
