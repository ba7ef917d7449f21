#!/usr/bin/env bash
# The portable engine's benchmark in smoke mode, so that bench/portable/run
# keeps working: its own private clusters, a few transactions of every cell,
# and the agreement check (the portable engine answers the C++ engine's
# scenario alike). Its figures are not a measurement. Prints
# "bench_portable_smoke: N passed, N failed".
set -uo pipefail
log=$(mktemp "${IDEM_WORK:-/tmp}/bench_portable_smoke.XXXXXX")
TMPDIR=${IDEM_WORK:-/tmp} bash bench/portable/run --smoke --installed 2>&1 | tee "$log"
st=${PIPESTATUS[0]}
if ! grep -qE '^bench_portable_smoke: [0-9]+ passed, [0-9]+ failed$' "$log"; then
  echo "bench_portable_smoke: 0 passed, 1 failed"
  st=1
fi
rm -f "$log"
exit "$st"
