#!/usr/bin/env bash
# The benchmark in smoke mode, so that bench/run keeps working: a private
# cluster of its own (not the shared test cluster), one short round of every
# cell, and the agreement check (idem, the PL/pgSQL reference and the plain
# SQL floor must classify the same small scenario alike). Its figures are not
# a measurement. Prints "bench_smoke: N passed, N failed".
set -uo pipefail
log=$(mktemp "${IDEM_WORK:-/tmp}/bench_smoke.XXXXXX")
TMPDIR=${IDEM_WORK:-/tmp} bash bench/run --smoke --installed 2>&1 | tee "$log"
st=${PIPESTATUS[0]}
if ! grep -qE '^bench_smoke: [0-9]+ passed, [0-9]+ failed$' "$log"; then
  echo "bench_smoke: 0 passed, 1 failed"
  st=1
fi
rm -f "$log"
exit "$st"
