#!/usr/bin/env bash
# Flat under churn: keys (or messages, or outbox events) written
# as fast as this machine sustains, kept a compressed retention, purged by
# the worker, for many retention periods. What it shows, per period: the
# table's size with its indexes, the expired rows the worker has not purged
# yet, the rows it purged, and the p50/p99 of the clients' transactions. A
# store that keeps up is flat after its first periods; one that does not
# grows by what it falls behind.
#
# Usage (as root, like ./run-tests): bench/churn.sh [keys|inbox|outbox]
#   CHURN_RETENTION  seconds a row is kept (30)
#   CHURN_PERIODS    retention periods measured after the warm-up (20)
#   CHURN_WARMUP     retention periods before them (default: the periods that
#                    cover checkpoint_timeout, 5 min, and one more): the
#                    table fills, autovacuum (naptime 1 min) has visited it,
#                    and the first timed checkpoint has begun, so the
#                    measured periods all run under the checkpoint cycle
#   CHURN_CLIENTS    pgbench clients; unset: the count among CHURN_PROBE
#                    ("2 4 8") with the most transactions a second in a short
#                    run with the worker on, which is then the peak rate
#   CHURN_STORAGE    a SQL file run after CREATE EXTENSION (storage settings
#                    to try), or unset for the shipped ones
#   CHURN_SYNC       synchronous_commit (off)
#   CHURN_SETTINGS   more postgresql.conf lines, separated by ';' (none)
#   CHURN_OUT        the report (bench/results/<date>-churn-<what>.md)
# The cluster: fsync on, shared_buffers 1GB, idem.naptime 1s, the default
# idem.batch_size and idem.batch_delay, autovacuum and checkpoints as
# PostgreSQL ships them (checkpoint_timeout 5 min, max_wal_size 1GB), so
# that every period pays for them alike, as on a server that has run for
# days; the report counts the checkpoints of each period. With checkpoints
# held off (max_wal_size 8GB), the one that came at last fell in the final
# periods and doubled their p99
# (bench/results/2026-11-26-churn-keys-shipped-8gb-wal.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh

WHAT=${1:-keys}
RETENTION=${CHURN_RETENTION:-30}
PERIODS=${CHURN_PERIODS:-20}
WARMUP=${CHURN_WARMUP:-$(((300 + RETENTION - 1) / RETENTION + 1))}
PROBE=${CHURN_PROBE:-2 4 8}
SYNC=${CHURN_SYNC:-off}
OUT=${CHURN_OUT:-bench/results/$(date -u +%F)-churn-$WHAT.md}

case $WHAT in
keys)
  TABLE=idem.idempotency_request
  EXPIRED="status <> 'processing' AND expires_at <= now()"
  PURGED="(SELECT rows_purged FROM idem.stats)"
  ;;
inbox)
  TABLE=idem.consumed_message
  EXPIRED="expires_at <= now()"
  # idem.stats counts keys only: the messages deleted are those written
  # (the sequence the clients draw ids from) that are no longer there.
  PURGED="(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM bench_message) - (SELECT count(*) FROM $TABLE)"
  ;;
outbox)
  TABLE=idem.outbox_event
  EXPIRED="status = 'published' AND published_at <= now() - interval '$RETENTION seconds'"
  PURGED="(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM bench_event) - (SELECT count(*) FROM $TABLE)"
  ;;
*)
  echo "usage: bench/churn.sh [keys|inbox|outbox]" >&2
  exit 2
  ;;
esac

IFS=';' read -ra EXTRA_SETTINGS <<<"${CHURN_SETTINGS:-}"
prepare_overhead_work churn cluster
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55631}" \
  "fsync = on" "shared_buffers = 1GB" \
  "synchronous_commit = $SYNC" "idem.database = 'postgres'" "idem.naptime = 1s" \
  "idem.retention = '${RETENTION}s'" "idem.inbox_retention = '${RETENTION}s'" \
  "idem.outbox_retention = '${RETENTION}s'" "${EXTRA_SETTINGS[@]}"
CONN=(-h "$PGHOST" -p "$PGPORT" -U postgres -d postgres)
psql_q() { as_cluster_user psql -XAtq -v ON_ERROR_STOP=1 "${CONN[@]}" "$@"; }
psql_q -c 'CREATE EXTENSION idem'
[ -z "${CHURN_STORAGE:-}" ] || psql_q -f "$CHURN_STORAGE"
psql_q -c 'CREATE SEQUENCE bench_message; CREATE SEQUENCE bench_event'

case $WHAT in
keys) cp bench/workloads/newkey_idem.sql "$WORK/churn.sql" ;;
inbox) echo "SELECT idem.consume_once('churn', nextval('bench_message')::text, 'h');" >"$WORK/churn.sql" ;;
outbox) cp bench/messages/outbox_idem.sql "$WORK/churn.sql" ;;
esac
chmod 644 "$WORK/churn.sql"

pgbench_run() {  # clients seconds [more pgbench options] -> pgbench's output
  local clients=$1 seconds=$2
  shift 2
  as_cluster_user pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" "$@" \
    "${CONN[@]}" -f "$WORK/churn.sql" 2>&1
}

if [ -n "${CHURN_CLIENTS:-}" ]; then
  CLIENTS=$CHURN_CLIENTS
else
  say "finding the peak rate: ${PROBE// /, } clients, 20 s each, the worker on"
  best=0
  for c in $PROBE; do
    tps=$(pgbench_run "$c" 20 | tps_of)
    echo "  $c clients: $tps tps"
    if [ "$(echo "$tps > $best" | bc)" = 1 ]; then best=$tps CLIENTS=$c; fi
  done
  psql_q -c "TRUNCATE $TABLE" -c "SELECT setval('bench_message', 1, false), setval('bench_event', 1, false)" \
    -c 'CHECKPOINT'
fi

TOTAL=$(((WARMUP + PERIODS) * RETENTION))
say "churn of $WHAT: $CLIENTS clients flat out for $TOTAL s ($WARMUP + $PERIODS periods of $RETENTION s)"
mkdir -p "$WORK/log" && chown postgres "$WORK/log" 2>/dev/null || true
# Every tenth transaction's latency, for the percentiles of each period.
(cd "$WORK/log" && pgbench_run "$CLIENTS" "$TOTAL" -l --sampling-rate=0.1 --log-prefix=churn) \
  >"$WORK/pgbench.out" &
bench_pid=$!

sample() {  # period -> one CSV line
  psql_q -F, -c "SELECT $1, extract(epoch FROM now())::bigint,
      pg_total_relation_size('$TABLE'),
      (SELECT count(*) FROM $TABLE),
      (SELECT count(*) FROM $TABLE WHERE $EXPIRED),
      $PURGED,
      (SELECT total_rounds FROM idem.worker_status),
      (SELECT state FROM idem.worker_status)"
}
# Checkpoints begun so far (pg_stat_checkpointer from PostgreSQL 17 on).
if [ "$(psql_q -c 'SHOW server_version_num')" -ge 170000 ]; then
  CHECKPOINTS="(SELECT num_timed + num_requested FROM pg_stat_checkpointer)"
else
  CHECKPOINTS="(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
fi
diagnose() {  # period -> one CSV line: where the size is, what vacuum and checkpoints did
  psql_q -F, -c "SELECT $1, pg_relation_size('$TABLE'), t.n_dead_tup, t.autovacuum_count, $CHECKPOINTS,
      w.wal_bytes, w.wal_fpi,
      (SELECT string_agg(c.relname || ' ' || pg_relation_size(c.oid), ' ' ORDER BY c.relname)
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = '$TABLE'::regclass)
    FROM pg_stat_user_tables t, pg_stat_wal w WHERE t.relid = '$TABLE'::regclass"
}
: >"$WORK/samples.csv"
: >"$WORK/diagnosis.csv"
start=$(date +%s)
for ((p = 1; p <= WARMUP + PERIODS; p++)); do
  # Sampled at each period's end, by the clock the periods are counted on.
  while (($(date +%s) < start + p * RETENTION)); do
    kill -0 "$bench_pid" 2>/dev/null || break 2
    sleep 0.2
  done
  sample "$p" | tee -a "$WORK/samples.csv"
  diagnose "$p" >>"$WORK/diagnosis.csv"
done
wait "$bench_pid" || true
tps=$(tps_of <"$WORK/pgbench.out")

machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), PostgreSQL $(psql_q -c 'SHOW server_version' | cut -d' ' -f1)"
setup="storage: ${CHURN_STORAGE:-as shipped}; settings: ${CHURN_SETTINGS:-the defaults}"
python3 - "$WORK" "$WARMUP" "$RETENTION" "$WHAT" "$CLIENTS" "$tps" "$SYNC" "$start" "$machine" "$setup" >"$OUT" <<'PY'
import csv, datetime, glob, sys, statistics
work, warmup, retention, what, clients, tps, sync, start, machine, setup = sys.argv[1:]
warmup, retention, start = int(warmup), int(retention), int(start)
rows = [r for r in csv.reader(open(f"{work}/samples.csv"))]
lat = {}
for path in glob.glob(f"{work}/log/churn*"):
    for line in open(path):
        f = line.split()
        # client, transaction, latency (us), script, epoch s, us
        period = (int(f[4]) - start) // retention + 1
        lat.setdefault(period, []).append(int(f[2]) / 1000.0)
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
print(f"# Churn of {what}: retention {retention} s, {clients} clients flat out, synchronous_commit {sync}\n")
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"{now}; {machine}; a private cluster, fsync on, shared_buffers 1 GB; {setup}.\n")
print(f"{tps} transactions a second over the run. Periods 1-{warmup} are the warm-up.\n")
print("| period | size (MB) | rows | expired, not purged | purged in the period | worker rounds | p50 (ms) | p99 (ms) |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
prev_purged = None
for r in rows:
    p, _, size, n, backlog, purged, rounds, state = r
    delta = "" if prev_purged is None else int(purged) - prev_purged
    prev_purged = int(purged)
    xs = lat.get(int(p), [])
    print(f"| {p} | {int(size) / 1048576:.0f} | {n} | {backlog} | {delta} | {rounds} | {pct(xs, .5):.3f} | {pct(xs, .99):.3f} |")
measured = [r for r in rows if int(r[0]) > warmup]
if measured:
    sizes = [int(r[2]) for r in measured]
    mid = statistics.median(sizes)
    spread = max(abs(s - mid) / mid for s in sizes)
    first, last = int(measured[0][0]), int(measured[-1][0])
    p99_ratio = pct(lat.get(last, []), .99) / pct(lat.get(first, []), .99)
    purged_per_round = (int(measured[-1][5]) - int(rows[warmup - 1][5] if warmup else 0)) / max(
        1, int(measured[-1][6]) - int(rows[warmup - 1][6] if warmup else 0))
    worst_backlog = max(int(r[4]) for r in measured)
    # One period's p99 moves with the checkpoint that falls in it; the
    # median of five periods' p99 at each end is the steadier comparison.
    ends = min(5, len(measured) // 2) or 1
    def p99s(rs): return [pct(lat.get(int(r[0]), []), .99) for r in rs]
    p99_ends = statistics.median(p99s(measured[-ends:])) / statistics.median(p99s(measured[:ends]))
    print(f"\nOver periods {first}-{last}: size within ±{spread * 100:.1f}% of its median "
          f"({mid / 1048576:.0f} MB); largest backlog {worst_backlog} rows, "
          f"{worst_backlog / max(purged_per_round, 1):.2f} rounds' worth "
          f"({purged_per_round:.0f} rows a round); p99 of period {last} / period {first}: {p99_ratio:.2f}; "
          f"median p99 of the last {ends} periods / the first {ends}: {p99_ends:.2f}.")
diagnosis = [r for r in csv.reader(open(f"{work}/diagnosis.csv"))]
if diagnosis:
    names = diagnosis[0][7].split()[0::2]
    print("\nWhere the size is (MB), and what vacuum and checkpoints did, at each period's end"
          " (autovacuums and checkpoints begun since the cluster started):\n")
    print("WAL is the server's in the period (MB), and its full-page images.\n")
    print("| period | heap | " + " | ".join(names)
          + " | dead tuples | autovacuums | checkpoints | WAL | full-page images |")
    print("| ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: | ---: | ---: | ---: | ---: |")
    wal_before, fpi_before = 0, 0
    for p, heap, dead, vacuums, checkpoints, wal, fpi, indexes in diagnosis:
        sizes = indexes.split()[1::2]
        wal, fpi = float(wal), int(fpi)
        print(f"| {p} | {int(heap) / 1048576:.1f} | "
              + " | ".join(f"{int(x) / 1048576:.1f}" for x in sizes)
              + f" | {dead} | {vacuums} | {checkpoints} | {(wal - wal_before) / 1048576:.0f}"
              + f" | {fpi - fpi_before} |")
        wal_before, fpi_before = wal, fpi
PY
cat "$OUT"
