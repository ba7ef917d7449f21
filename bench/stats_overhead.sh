#!/usr/bin/env bash
# What counting costs: a new key's lifecycle (claim, then mark_succeeded) with
# pgbench -M prepared on two identical clusters from one private install, one
# with shared_preload_libraries = 'idem' (counting) and one without (count()
# is then a no-op). Runs alternate ABBA so drift and neighbours' load fall on
# both alike. Each run reports tps and the server's CPU time per lifecycle
# (all of the cluster's processes, the exited backends included, from
# /proc); on a shared machine the CPU time is the steadier of the two, since
# other people's load changes tps far more than it changes our CPU per call.
# Prints each pair and the median ratios (counting / plain).
# Usage (as root, like ./run-tests): bench/stats_overhead.sh [pairs] [seconds] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh
PAIRS=${1:-8}
SECONDS_PER_RUN=${2:-10}
CLIENTS=${3:-4}

prepare_overhead_work overhead counting plain

# Autovacuum off on both: a vacuum of one cluster's growing table during the
# other's run would be measured as a difference between them.
restart_with() {  # side settings...
  local side=$1
  shift
  printf '%s\n' "$@" >>"$WORK/$side/data/postgresql.conf"
  as_cluster_user "$PGBIN/pg_ctl" -D "$WORK/$side/data" -l "$WORK/$side/server.log" -w restart >/dev/null
}
start_cluster "$WORK/counting" 55611
COUNTING=(-h "$PGHOST" -p "$PGPORT")
restart_with counting "autovacuum = off"
start_cluster "$WORK/plain" 55612
PLAIN=(-h "$PGHOST" -p "$PGPORT")
restart_with plain "autovacuum = off" "shared_preload_libraries = ''"

write_lifecycle_script
as_cluster_user psql -XAtq "${COUNTING[@]}" -U postgres -d postgres -c 'CREATE EXTENSION idem' >/dev/null
as_cluster_user psql -XAtq "${PLAIN[@]}" -U postgres -d postgres -c 'CREATE EXTENSION idem' >/dev/null
as_cluster_user psql -XAtq "${COUNTING[@]}" -U postgres -d postgres -c 'SELECT idem.stats_reset()' >/dev/null
if as_cluster_user psql -XAtq "${PLAIN[@]}" -U postgres -d postgres -c 'SELECT 1 FROM idem.stats' >/dev/null 2>&1; then
  echo "the plain cluster has counters: not a fair comparison" >&2; exit 1
fi

# CPU clock ticks used so far by a cluster: the postmaster, its reaped
# children (exited backends) and its live children.
server_ticks() {  # data directory
  local pm ticks child
  pm=$(head -1 "$1/postmaster.pid")
  ticks=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
  for child in $(pgrep -P "$pm"); do
    ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0)))
  done
  echo "$ticks"
}

run() {  # side -> "tps cpu-microseconds-per-lifecycle" of one run
  local -n conn=$1
  local dir=$WORK/${2}/data before after out tps count
  before=$(server_ticks "$dir")
  out=$(as_cluster_user pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" -U postgres \
    "${conn[@]}" -f "$WORK/lifecycle.sql" postgres 2>/dev/null)
  sleep 0.5  # let the postmaster reap the backends, so their CPU is counted
  after=$(server_ticks "$dir")
  tps=$(echo "$out" | tps_of)
  count=$(echo "$out" | grep -oE 'actually processed: [0-9]+' | grep -oE '[0-9]+')
  echo "$tps $(echo "scale=2; ($after - $before) * 1000000 / $(getconf CLK_TCK) / $count" | bc)"
}

run COUNTING counting >/dev/null; run PLAIN plain >/dev/null  # warm-up, not counted
tps_ratios=()
cpu_ratios=()
printf '%-5s %12s %12s %8s   %14s %14s %8s\n' pair tps-counting tps-plain ratio cpu-us-counting cpu-us-plain ratio
for i in $(seq 1 "$PAIRS"); do
  if (( i % 2 )); then
    read -r ct cc <<<"$(run COUNTING counting)"; read -r pt pc <<<"$(run PLAIN plain)"
  else
    read -r pt pc <<<"$(run PLAIN plain)"; read -r ct cc <<<"$(run COUNTING counting)"
  fi
  tr=$(echo "scale=4; $ct / $pt" | bc)
  cr=$(echo "scale=4; $cc / $pc" | bc)
  tps_ratios+=("$tr")
  cpu_ratios+=("$cr")
  printf '%-5s %12s %12s %8s   %14s %14s %8s\n' "$i" "$ct" "$pt" "$tr" "$cc" "$pc" "$cr"
done
echo "over $PAIRS pairs of ${SECONDS_PER_RUN}s, $CLIENTS clients:"
echo "  median tps ratio (counting/plain):               $(printf '%s\n' "${tps_ratios[@]}" | median)"
echo "  median server CPU per lifecycle (counting/plain): $(printf '%s\n' "${cpu_ratios[@]}" | median)"
as_cluster_user psql -XAt "${COUNTING[@]}" -U postgres -d postgres \
  -c "SELECT 'counted: new_claim ' || new_claim || ', marked_succeeded ' || marked_succeeded FROM idem.stats WHERE datname = 'postgres'"
