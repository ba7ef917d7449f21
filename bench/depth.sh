#!/usr/bin/env bash
# Deep tables: what a key table of 10 million or 100 million
# keys costs a request, against what it costs PostgreSQL itself on the same
# table. For each size the table is filled without the request path, then
# the replay and the new-key lifecycle run against their peers, taking turns:
#   replay: idem's claim of a finished key, against one bare primary-key
#     SELECT of the stored response (pkread) and the plain-SQL floor's
#     INSERT ... ON CONFLICT DO NOTHING then SELECT (floor), on idem's table
#   new key: idem's claim and mark_succeeded, against the floor's INSERT ...
#     ON CONFLICT DO NOTHING RETURNING then UPDATE by primary key, on idem's
#     table
# and reports each one's p50/p99 (every tenth transaction, pgbench's log),
# its tps, and the table's bytes per key (heap, primary key, purge index).
#
# Usage (as root, like ./run-tests): bench/depth.sh
#   DEPTH_SIZES    keys per table, powers of ten (10000 10000000 100000000)
#   DEPTH_CLIENTS  pgbench clients (4)
#   DEPTH_SECONDS  seconds per run (20)
#   DEPTH_ROUNDS   rounds, the peers' order turning each round (2)
#   DEPTH_SYNC     synchronous_commit (off)
#   DEPTH_OUT      the report (bench/results/<date>-depth.md)
#   DEPTH_LEAN_AT  the size at which a leaner row's bytes are measured too
#                  (10000000): the same rows with the hash as bytea
# The cluster: fsync on, shared_buffers 1GB, the worker off (nothing in the
# table expires during the run), autovacuum as shipped.
#
# The keys: 19-digit decimal strings spread evenly over the range the new-key
# scripts draw from (1e18 to 9e18), loaded in key order, so that the new
# keys of the run land among them as a real API's random keys would, all the
# way down a deep primary key. The load is one COPY FREEZE into the table
# truncated in the same transaction (wal_level minimal, so it writes no WAL
# and leaves the rows frozen and all-visible, as an old table's are); every
# row passes the table's CHECK of the key invariants as it is copied.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh

SIZES=${DEPTH_SIZES:-10000 10000000 100000000}
CLIENTS=${DEPTH_CLIENTS:-4}
SECS=${DEPTH_SECONDS:-20}
ROUNDS=${DEPTH_ROUNDS:-2}
SYNC=${DEPTH_SYNC:-off}
OUT=${DEPTH_OUT:-bench/results/$(date -u +%F)-depth.md}
for n in $SIZES; do
  [[ $n =~ ^10*$ && ${#n} -ge 2 && ${#n} -le 10 ]] ||
    { echo "DEPTH_SIZES: powers of ten from 10 to 1000000000 ($n)" >&2; exit 2; }
done

prepare_overhead_work depth cluster
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55641}" \
  "fsync = on" "shared_buffers = 1GB" "max_wal_size = 16GB" "checkpoint_timeout = 30min" \
  "wal_level = minimal" "max_wal_senders = 0" "maintenance_work_mem = 1GB" \
  "synchronous_commit = $SYNC" "idem.database = 'postgres'" "idem.worker_enabled = off"
CONN=(-h "$PGHOST" -p "$PGPORT" -U postgres -d postgres)
psql_q() { as_cluster_user psql -XAtq -v ON_ERROR_STOP=1 "${CONN[@]}" "$@"; }
psql_q -c 'CREATE EXTENSION idem'
HASH=b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c

# The peers' scripts, made from bench/workloads' for the scope 'deep'.
# $1: the pgbench expression of a loaded key (replay) or nothing (new key).
write_scripts() {  # loaded-key-expression
  local pick=$1
  sed -e "s/'newkey'/'deep'/g" bench/workloads/newkey_idem.sql >"$WORK/newkey_idem.sql"
  sed -e "s/'newkey'/'deep'/g" -e 's/\bfloor\./idem./g' bench/workloads/newkey_floor.sql \
    >"$WORK/newkey_floor.sql"
  for peer in idem pkread floor; do
    sed -e "s/^\\\\set k random(1, 200000)\$/$pick/" -e "s/'replay'/'deep'/g" -e 's/\bfloor\./idem./g' \
      "bench/workloads/replay_$peer.sql" >"$WORK/replay_$peer.sql"
    grep -q "^\\\\set k 1" "$WORK/replay_$peer.sql" || { echo "replay_$peer.sql: no key to replace" >&2; exit 1; }
  done
  chmod 644 "$WORK"/*.sql
}

# n keys, the i-th (1..n) being (10^m + 8i) * 10^(18-m) for n = 10^m.
load() {  # n
  local n=$1 m=$((${#1} - 1))
  local zeros t0
  zeros=$(printf '%0*d' $((18 - m)) 0)
  t0=$(date -u -d '1 hour ago' '+%F %T+00')
  # Each key expires a millisecond after the one before, from a day a
  # hundred years ahead: distinct expiries, as real ones are, that the run
  # never reaches.
  cat >"$WORK/gen.awk" <<AWK
BEGIN {
  for (i = 1; i <= $n; i++) {
    ms = i; s = int(ms / 1000); ms -= s * 1000
    d = int(s / 86400); s -= d * 86400
    printf "deep\t%d$zeros\t$HASH\tsucceeded\tfinished\t%d\t1\t$t0\t201\t{\"id\": 1}\t$t0\t$t0\t$t0\t2126-01-%02d %02d:%02d:%02d.%03d+00\n", \
      10^$m + 8 * i, i, d + 1, int(s / 3600), int(s % 3600 / 60), s % 60, ms
  }
}
AWK
  chmod 644 "$WORK/gen.awk"
  psql_q <<SQL
BEGIN;
TRUNCATE idem.idempotency_request;
COPY idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence, attempt_count,
    claimed_at, response_code, response_body, created_at, updated_at, finished_at, expires_at)
  FROM PROGRAM 'awk -f $WORK/gen.awk' WITH (FREEZE);
COMMIT;
SELECT setval('idem.fence_seq', $n);
VACUUM ANALYZE idem.idempotency_request;
CHECKPOINT;
SQL
}

RAW=$WORK/raw.tsv
: >"$RAW"
run() {  # size workload peer round
  local size=$1 workload=$2 peer=$3 round=$4 dir
  dir=$WORK/log/$size-$workload-$peer-$round
  mkdir -p "$dir" && chown postgres "$dir" 2>/dev/null || true
  local out tps
  out=$(cd "$dir" && as_cluster_user pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECS" \
    -l --sampling-rate=0.1 --log-prefix=lat "${CONN[@]}" -f "$WORK/${workload}_$peer.sql" 2>&1) ||
    { echo "$out" | tail -5; exit 1; }
  if echo "$out" | grep -qE 'aborted|ERROR'; then echo "$out" | grep -E 'aborted|ERROR' | head -3; exit 1; fi
  tps=$(echo "$out" | tps_of)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$workload" "$peer" "$round" "$tps" "$dir" >>"$RAW"
}

turns() {  # size workload round peer...: each peer once, in reverse order every other round
  local size=$1 workload=$2 round=$3 peer
  shift 3
  local peers=("$@")
  [ $((round % 2)) = 0 ] && mapfile -t peers < <(printf '%s\n' "$@" | tac)
  for peer in "${peers[@]}"; do
    say "$size keys, round $round: $workload, $peer"
    run "$size" "$workload" "$peer" "$round"
  done
}

SIZES_TSV=$WORK/sizes.tsv
: >"$SIZES_TSV"
for n in $SIZES; do
  m=$((${#n} - 1))
  write_scripts "\\\\set i random(1, $n)\\n\\\\set k $((10 ** 18)) + :i * $((8 * 10 ** (18 - m)))"
  say "$n keys: loading (COPY FREEZE, one transaction)"
  t=$(date +%s)
  load "$n"
  say "$n keys: loaded in $(($(date +%s) - t)) s"
  psql_q -F $'\t' -c "SELECT $n, pg_relation_size('idem.idempotency_request'),
      pg_relation_size('idem.idempotency_request_pkey'),
      pg_relation_size('idem.idempotency_request_purge_idx'),
      pg_total_relation_size('idem.idempotency_request')" >>"$SIZES_TSV"
  for ((round = 1; round <= ROUNDS; round++)); do
    turns "$n" replay "$round" idem pkread floor
    turns "$n" newkey "$round" idem floor
  done
  # Every key the run claimed new is there, finished, and every loaded key
  # is still there: the load and the runs kept the table's invariants.
  counts=$(psql_q -F ' ' -c "SELECT count(*) FILTER (WHERE fence <= $n),
      count(*) FILTER (WHERE NOT (scope = 'deep' AND status = 'succeeded' AND response_code = 201))
    FROM idem.idempotency_request")
  [ "$counts" = "$n 0" ] ||
    { echo "$n keys: loaded keys and keys not finished with 201: $counts" >&2; exit 1; }
  # A leaner row, measured rather than guessed: the same rows with the
  # request hash as its 32 raw bytes (bytea) instead of 64 hex digits, the
  # same primary key and purge index.
  if [ "$n" = "${DEPTH_LEAN_AT:-10000000}" ]; then
    say "$n keys: the same rows with the hash as bytea"
    psql_q -F $'\t' >>"$WORK/lean.tsv" <<SQL
CREATE TABLE lean (LIKE idem.idempotency_request INCLUDING DEFAULTS);
ALTER TABLE lean ALTER request_hash TYPE bytea USING decode(request_hash, 'hex');
INSERT INTO lean SELECT scope, key, decode(request_hash, 'hex'), status, recovery_point, fence, attempt_count,
    claimed_by, claimed_at, locked_until, response_code, response_body, result_ref_type, result_ref_id,
    failure_code, failure_message, created_at, updated_at, finished_at, expires_at, bound_session
  FROM idem.idempotency_request WHERE fence <= $n;
ALTER TABLE lean ADD PRIMARY KEY (scope, key);
CREATE INDEX lean_purge ON lean (expires_at) WHERE status <> 'processing';
VACUUM lean;
SELECT $n, pg_relation_size('lean'), pg_relation_size('lean_pkey'), pg_relation_size('lean_purge'),
       pg_total_relation_size('lean');
DROP TABLE lean;
SQL
  fi
done

machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), PostgreSQL $(psql_q -c 'SHOW server_version' | cut -d' ' -f1)"
touch "$WORK/lean.tsv"
python3 - "$RAW" "$SIZES_TSV" "$machine" "$CLIENTS" "$SECS" "$ROUNDS" "$SYNC" "$WORK/lean.tsv" >"$OUT" <<'PY'
import csv, datetime, glob, statistics, sys
raw, sizes_tsv, machine, clients, secs, rounds, sync, lean_tsv = sys.argv[1:]
runs = [r for r in csv.reader(open(raw), delimiter="\t")]
sizes = {int(r[0]): [int(x) for x in r[1:]] for r in csv.reader(open(sizes_tsv), delimiter="\t")}
lat, tps = {}, {}
for size, workload, peer, _round, t, d in runs:
    k = (int(size), workload, peer)
    tps.setdefault(k, []).append(float(t))
    for path in glob.glob(f"{d}/lat*"):
        lat.setdefault(k, []).extend(int(line.split()[2]) / 1000.0 for line in open(path))
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"# Deep tables, {now}\n")
print(f"Machine: {machine}; a private cluster, fsync on, shared_buffers 1 GB, synchronous_commit {sync}; "
      f"{clients} pgbench clients (-M prepared), {rounds} rounds of {secs} s per peer, the peers taking turns; "
      "p50/p99 of every tenth transaction of all rounds, tps the median of the rounds. A replay is one "
      "transaction; a new key is two (claim, then mark).\n")
print("| keys | table (MB) | bytes a key: heap | primary key | purge index | total |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for n, (heap, pk, purge, total) in sorted(sizes.items()):
    print(f"| {n:,} | {total / 1048576:,.0f} | {heap / n:.0f} | {pk / n:.0f} | {purge / n:.0f} | {total / n:.0f} |")
for r in csv.reader(open(lean_tsv), delimiter="\t"):
    if len(r) == 5:
        n, heap, pk, purge, total = (int(x) for x in r)
        print(f"| {n:,}, hash as bytea | {total / 1048576:,.0f} | {heap / n:.0f} | {pk / n:.0f} | {purge / n:.0f} | {total / n:.0f} |")
print()
smallest = min(sizes)
peers = {"replay": ("idem", "pkread", "floor"), "newkey": ("idem", "floor")}
print("| workload | keys | peer | tps | p50 (ms) | p99 (ms) | p99 / its p99 at the smallest size | idem p99 / peer p99 | idem tps / peer tps |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for workload in ("replay", "newkey"):
    for n in sorted(sizes):
        for peer in peers[workload]:
            k = (n, workload, peer)
            if k not in tps:
                continue
            t = statistics.median(tps[k])
            p50, p99 = pct(lat[k], .5), pct(lat[k], .99)
            base = pct(lat.get((smallest, workload, peer), []), .99)
            idem = (n, workload, "idem")
            vs = "" if peer == "idem" else f"{pct(lat[idem], .99) / p99:.2f}"
            vt = "" if peer == "idem" else f"{statistics.median(tps[idem]) / t:.2f}"
            print(f"| {workload} | {n:,} | {peer} | {t:,.0f} | {p50:.3f} | {p99:.3f} | {p99 / base:.2f} | {vs} | {vt} |")
PY
cat "$OUT"
