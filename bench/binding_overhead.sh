#!/usr/bin/env bash
# What idem.bind_lock_to_session costs: a new key's lifecycle (claim, then
# mark_succeeded) with pgbench -M prepared on one cluster that preloads idem,
# each client's session with the binding off or on (PGOPTIONS). Runs
# alternate ABBA so drift and neighbours' load fall on both alike. Prints
# each pair and the median tps ratio (on / off). A bound claim writes one
# more column and, at the session's first binding claim, registers a token;
# a session's end (pgbench reconnects nothing here) clears it.
# Usage (as root, like ./run-tests): bench/binding_overhead.sh [pairs] [seconds] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh
PAIRS=${1:-6}
SECONDS_PER_RUN=${2:-10}
CLIENTS=${3:-4}

prepare_overhead_work binding cluster
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55621}"
CONN=(-h "$PGHOST" -p "$PGPORT")
as_cluster_user psql -XAtq "${CONN[@]}" -U postgres -d postgres -c 'CREATE EXTENSION IF NOT EXISTS idem' >/dev/null

write_lifecycle_script

run() {  # on|off -> tps of one run
  as_cluster_user env PGOPTIONS="-c idem.bind_lock_to_session=$1" pgbench -n -M prepared \
    -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" -U postgres "${CONN[@]}" -f "$WORK/lifecycle.sql" \
    postgres 2>/dev/null | tps_of
}

run off >/dev/null; run on >/dev/null  # warm-up, not counted
ratios=()
printf '%-5s %12s %12s %8s\n' pair tps-on tps-off ratio
for i in $(seq 1 "$PAIRS"); do
  if (( i % 2 )); then on=$(run on); off=$(run off); else off=$(run off); on=$(run on); fi
  ratio=$(echo "scale=4; $on / $off" | bc)
  ratios+=("$ratio")
  printf '%-5s %12s %12s %8s\n' "$i" "$on" "$off" "$ratio"
done
echo "over $PAIRS pairs of ${SECONDS_PER_RUN}s, $CLIENTS clients:"
echo "  median tps ratio (binding on/off): $(printf '%s\n' "${ratios[@]}" | median)"
as_cluster_user psql -XAt "${CONN[@]}" -U postgres -d postgres \
  -c "SELECT 'bound keys written: ' || count(*) FROM idem.idempotency_request WHERE bound_session IS NOT NULL"
