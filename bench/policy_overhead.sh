#!/usr/bin/env bash
# What the per-scope policy lookup costs a claim: a new key's lifecycle
# (claim, then mark_succeeded) with pgbench -M prepared on one cluster, with
# idem.scope_policy empty and with 10,000 rows (the benchmarked scope among
# them, with the settings' values, so the claim finds and applies a policy).
# The table is refilled or emptied between runs, alternating ABBA so drift and
# neighbours' load fall on both alike; each backend reloads its cache once
# after the change (pgbench's connections are new per run). Prints each pair
# and the median ratio (10,000 rows / none).
# Usage (as root, like ./run-tests): bench/policy_overhead.sh [pairs] [seconds] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh
PAIRS=${1:-8}
SECONDS_PER_RUN=${2:-10}
CLIENTS=${3:-4}

prepare_overhead_work policy-overhead cluster
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55621}"
CONN=(-h "$PGHOST" -p "$PGPORT" -U postgres -d postgres)
sql() { as_cluster_user psql -XAtq "${CONN[@]}" -c "$1" >/dev/null; }
sql 'CREATE EXTENSION idem'

write_lifecycle_script

policies() {  # with | none
  sql 'TRUNCATE idem.scope_policy'
  [ "$1" = with ] && sql "INSERT INTO idem.scope_policy (scope, lock_timeout, retention)
    SELECT CASE g WHEN 1 THEN 'bench' ELSE 'scope_' || g END, '5 minutes', '1 day'
      FROM generate_series(1, 10000) g"
  sql 'CHECKPOINT'
}

run() {  # with | none -> tps
  policies "$1"
  as_cluster_user pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" "${CONN[@]}" \
    -f "$WORK/lifecycle.sql" 2>/dev/null | tps_of
}

ratios=()
for ((i = 1; i <= PAIRS; i++)); do
  if ((i % 2)); then none=$(run none); with=$(run with); else with=$(run with); none=$(run none); fi
  ratio=$(echo "scale=4; $with / $none" | bc)
  ratios+=("$ratio")
  printf 'pair %d: none %s tps, 10,000 policies %s tps, ratio %s\n' "$i" "$none" "$with" "$ratio"
done
echo "median ratio (10,000 policies / none): $(printf '%s\n' "${ratios[@]}" | median) over $PAIRS pairs"
