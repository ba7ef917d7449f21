#!/usr/bin/env bash
# Where the new-key lifecycle's time goes, in instructions (load-independent,
# so exact on a busy machine where tps is not): a single-user backend under
# valgrind (callgrind) runs N lifecycles of one peer as prepared statements,
# each statement its own transaction, like pgbench -M prepared without the
# network. A run of one lifecycle is subtracted, so start-up and first-call
# caches cancel out. Peers: idem, floor, ref, bare (bench/workloads/newkey_*.sql).
# Usage (as root, like ./run-tests; needs valgrind):
#   bench/lifecycle_instructions.sh [N] [peers...]    default 500, all three
# WORKLOAD=replay counts a replay of a finished key instead: peers idem and
# pkread (one bare primary-key SELECT of the stored response, the least any
# store can do to answer a retry; bench/workloads/replay_pkread.sql).
# WORKLOAD=inbox counts consume_once of a new message against the plain
# inbox table's INSERT ... ON CONFLICT DO NOTHING (bench/messages/).
# With KEEP=1 the callgrind files stay in the printed directory for
# callgrind_annotate. To compare shapes of idem's table: IDEM_VERSION=1.0
# installs that version of idem (its thirteen CHECK constraints), and
# SHAPE=file.sql runs a file after idem is installed and before the floor and
# the reference copy its table (bench/shapes/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
N=${1:-500}
shift || true
WORKLOAD=${WORKLOAD:-newkey}
case $WORKLOAD in
  newkey) PEER_LIST=${*:-idem floor ref}; WHAT="new-key lifecycle" ;;
  replay) PEER_LIST=${*:-idem pkread}; WHAT="replay" ;;
  inbox) PEER_LIST=${*:-idem plain}; WHAT="new message" ;;
  *) echo "WORKLOAD is newkey, replay or inbox" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }

build_extension
WORK=$(mktemp -d /tmp/idem-lifecycle.XXXXXX)
chmod 755 "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
make_private_install "$WORK/install"
[ "$(id -u)" -eq 0 ] && chown -R postgres "$WORK"
# The template: a stopped cluster with idem, the reference and the floor.
mkdir -p "$WORK/cluster"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK/cluster"
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55498}"
psql -qAtX -v ON_ERROR_STOP=1 -d postgres \
  -c "CREATE EXTENSION idem${IDEM_VERSION:+ VERSION '$IDEM_VERSION'}" >/dev/null
[ -z "${SHAPE:-}" ] || psql -qAtX -v ON_ERROR_STOP=1 -d postgres -f "$SHAPE" >/dev/null
for f in bench/reference.sql bench/floor/schema.sql bench/bare/schema.sql; do
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -f "$f" >/dev/null
done
hash=b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c
if [ "$WORKLOAD" = inbox ]; then
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -c "
    CREATE TABLE plain_inbox (
      consumer text NOT NULL, message_id text NOT NULL, message_hash text NOT NULL,
      consumed_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id))" >/dev/null
fi
if [ "$WORKLOAD" = replay ]; then
  # The finished keys the replays read: k1 .. k(N+1).
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -c "
    SELECT count(idem.mark_succeeded('replay', 'k' || g, (c).fence, 201, '{\"id\": 1}'))
    FROM (SELECT g, idem.claim_idempotency_key('replay', 'k' || g, '$hash') c
          FROM generate_series(1, $N + 1) g) s" >/dev/null
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -c "VACUUM ANALYZE idem.idempotency_request" >/dev/null
fi
stop_cluster "$WORK/cluster"
mv "$WORK/cluster/data" "$WORK/template"

script() {  # peer lifecycles -> the statements, one per line
  local peer=$1 n=$2 i
  # PRELUDE: statements the session runs first (SET ROLE to a role a SHAPE
  # file made), in the base run and the measured one alike.
  [ -z "${PRELUDE:-}" ] || echo "$PRELUDE"
  # replay and inbox: one statement per key k1 .. kn.
  local statement=""
  case $WORKLOAD/$peer in
    replay/idem) statement="SELECT kind, response_code, response_body FROM idem.claim_idempotency_key('replay', \$1, '$hash')" ;;
    replay/pkread) statement="SELECT response_code, response_body FROM idem.idempotency_request WHERE scope = 'replay' AND key = \$1" ;;
    inbox/idem) statement="SELECT idem.consume_once('new', \$1, 'h')" ;;
    inbox/plain) statement="INSERT INTO plain_inbox VALUES ('new', \$1, 'h', now()) ON CONFLICT DO NOTHING" ;;
  esac
  if [ -n "$statement" ]; then
    echo "PREPARE r(text) AS $statement;"
    for ((i = 1; i <= n; i++)); do echo "EXECUTE r('k$i');"; done
    return
  fi
  case $peer in
    idem | ref)
      echo "PREPARE c(text) AS SELECT kind, fence FROM $peer.claim_idempotency_key('newkey', \$1, '$hash');"
      echo "PREPARE m(text, bigint) AS SELECT $peer.mark_succeeded('newkey', \$1, \$2, 201, '{\"id\": 1}');" ;;
    floor | bare)
      echo "PREPARE c(text) AS INSERT INTO $peer.idempotency_request (scope, key, request_hash, status, recovery_point, fence, attempt_count, claimed_at, locked_until, created_at, updated_at, expires_at) VALUES ('newkey', \$1, '$hash', 'processing', 'started', nextval('$peer.fence_seq'), 1, now(), now() + interval '5 minutes', now(), now(), now() + interval '24 hours') ON CONFLICT (scope, key) DO NOTHING RETURNING fence;"
      echo "PREPARE m(text, bigint) AS UPDATE $peer.idempotency_request SET status = 'succeeded', recovery_point = 'finished', response_code = 201, response_body = '{\"id\": 1}', locked_until = NULL, finished_at = now(), updated_at = now() WHERE scope = 'newkey' AND key = \$1 AND fence = \$2 AND status = 'processing';" ;;
  esac
  # A fresh cluster draws fences 1, 2, ... in order: lifecycle i owns fence i.
  for ((i = 1; i <= n; i++)); do echo "EXECUTE c('k$i');"; echo "EXECUTE m('k$i', $i);"; done
}

instructions() {  # peer lifecycles -> instructions executed by the backend
  local dir=$WORK/run-$1-$2
  cp -a "$WORK/template" "$dir"
  script "$1" "$2" >"$dir/script.sql"
  as_cluster_user valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    "$PGBIN/postgres" --single -D "$dir" postgres <"$dir/script.sql" >"$dir/out.log" 2>"$dir/valgrind.log"
  if grep -q ERROR "$dir/valgrind.log"; then grep -m3 ERROR "$dir/valgrind.log" >&2; exit 1; fi
  grep -E '^(summary|totals):' "$dir/callgrind.out" | tail -1 | awk '{print $2}'
}

for peer in $PEER_LIST; do
  base=$(instructions "$peer" 1)
  run=$(instructions "$peer" $((N + 1)))
  echo "$peer: $(( (run - base) / N )) instructions per $WHAT"
done
[ "${KEEP:-0}" = 1 ] && echo "callgrind files kept in $WORK"
exit 0
