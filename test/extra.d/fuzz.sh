#!/usr/bin/env bash
# libFuzzer on the pure C++ canonicalizer (test/fuzz/jcs_fuzz.cpp, corpus in
# test/fuzz/corpus), for a bounded time, as part of the test command.
# test/fuzz/run.sh prints the executions made and the closing
# "fuzz: N passed, N failed" line; its exit status is ours.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v clang++-14 >/dev/null || { echo "clang++-14 not found in PATH"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
build=${IDEM_WORK:-$(mktemp -d)}/fuzz-build
echo "fuzzing the JCS canonicalizer for ${FUZZ_SECONDS:-20}s, corpus of $(ls test/fuzz/corpus | wc -l) seeds"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash test/fuzz/run.sh "$build"
