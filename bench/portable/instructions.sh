#!/usr/bin/env bash
# Instructions per new-key lifecycle of the portable engine, beside the
# reference (load-independent, so exact on a busy machine where pgbench's
# tps is not): as bench/lifecycle_instructions.sh does for the C++ engine,
# a single-user backend under valgrind (callgrind) runs N lifecycles
# (claim, then mark_succeeded, each its own transaction, as prepared
# statements) minus a run of one, so start-up and first-call caches cancel
# out. Peers: databases of one template cluster without idem's library,
# each with a portable install file; "ref" gets bench/reference.sql over
# the first file's schema (ref borrows idem's status type).
#   bench/portable/instructions.sh [N] [install.sql ...]   default 200, dist/idem-portable.sql
# e.g. before and after a body change:
#   git show HEAD~1:dist/idem-portable.sql >/tmp/before.sql
#   bench/portable/instructions.sh 200 /tmp/before.sql dist/idem-portable.sql
# WORKLOAD=hot counts a takeover claim of a failed key, a claim that finds
# it in flight, and mark_failed(retryable) instead (no ref: its claim draws a
# fence at every call, so its fences cannot be scripted ahead).
# WORKLOAD=inbox counts consume_once of a new message, its retention from
# the setting's default (no argument, no policy), instead (no ref).
# WORKLOAD=replay counts a claim of a key that succeeded (one of N+1 rows
# written before the run) instead.
# SETTINGS: statements run first in each backend, e.g. the values idem's
# library registers where it is loaded beside the portable engine:
#   SETTINGS="SET idem.require_scope_owner = off; SET idem.lock_timeout = '5min';
#             SET idem.retention = '1d'; SET idem.bind_lock_to_session = off;"
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
N=${1:-200}
shift || true
FILES=("${@:-dist/idem-portable.sql}")
WORKLOAD=${WORKLOAD:-newkey}
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }
PGBIN=$("$HOST_PG_CONFIG" --bindir)
export PATH="$PGBIN:$PATH"
WORK=$(mktemp -d /tmp/idem-portable-instructions.XXXXXX)
chmod 755 "$WORK"
trap 'stop_cluster "$WORK/cluster"; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/cluster"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK/cluster"
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55498}" "shared_preload_libraries = ''"
peers=()
for i in "${!FILES[@]}"; do
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE p$i" >/dev/null
  psql -qAtX -v ON_ERROR_STOP=1 -d "p$i" -f "${FILES[$i]}" >/dev/null
  peers+=("p$i")
done
if [ "$WORKLOAD" = newkey ] || [ "$WORKLOAD" = replay ]; then
  psql -qAtX -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE ref" >/dev/null
  psql -qAtX -v ON_ERROR_STOP=1 -d ref -f "${FILES[0]}" -f bench/reference.sql >/dev/null
  peers+=(ref)
fi
if [ "$WORKLOAD" = replay ]; then
  for peer in "${peers[@]}"; do
    s=idem
    [ "$peer" = ref ] && s=ref
    psql -qAtX -v ON_ERROR_STOP=1 -d "$peer" -c "INSERT INTO $s.idempotency_request (scope, key,
        request_hash, status, recovery_point, fence, attempt_count, claimed_at, response_code,
        response_body, created_at, updated_at, finished_at, expires_at)
      SELECT 'replay', 'k' || g, 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c',
             'succeeded', 'finished', g, 1, now(), 200, '{\"id\": 1}', now(), now(), now(), 'infinity'
        FROM generate_series(1, $((N + 1))) g" >/dev/null
  done
fi
stop_cluster "$WORK/cluster"
hash=b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c

script() {  # database lifecycles -> the statements; fences drawn from 1000001 on
  local s=idem i
  [ "$1" = ref ] && s=ref
  echo "SELECT setval('$s.fence_seq', 1000000);"
  [ -z "${SETTINGS:-}" ] || echo "$SETTINGS"
  if [ "$WORKLOAD" = replay ]; then
    echo "PREPARE r(text) AS SELECT kind, response_code, response_body FROM $s.claim_idempotency_key('replay', \$1, '$hash');"
    for ((i = 1; i <= $2; i++)); do echo "EXECUTE r('k$i');"; done
  elif [ "$WORKLOAD" = inbox ]; then
    echo "PREPARE i(text) AS SELECT $s.consume_once('inbox', \$1, '$hash');"
    for ((i = 1; i <= $2; i++)); do echo "EXECUTE i('m$i');"; done
  elif [ "$WORKLOAD" = hot ]; then
    echo "PREPARE h AS SELECT kind, fence FROM $s.claim_idempotency_key('hot', 'k', '$hash');"
    echo "PREPARE f(bigint) AS SELECT $s.mark_failed('hot', 'k', \$1, true, 'try_again');"
    for ((i = 1; i <= $2; i++)); do echo "EXECUTE h;"; echo "EXECUTE h;"; echo "EXECUTE f($((1000000 + i)));"; done
  else
    echo "PREPARE c(text) AS SELECT kind, fence FROM $s.claim_idempotency_key('newkey', \$1, '$hash');"
    echo "PREPARE m(text, bigint) AS SELECT $s.mark_succeeded('newkey', \$1, \$2, 201, '{\"id\": 1}');"
    for ((i = 1; i <= $2; i++)); do echo "EXECUTE c('k$i');"; echo "EXECUTE m('k$i', $((1000000 + i)));"; done
  fi
}
instructions() {  # database lifecycles -> instructions executed by the backend
  local dir=$WORK/run-$1-$2
  cp -a "$WORK/cluster/data" "$dir"
  script "$1" "$2" >"$dir/script.sql"
  as_cluster_user valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    "$PGBIN/postgres" --single -D "$dir" "$1" <"$dir/script.sql" >"$dir/out.log" 2>"$dir/valgrind.log"
  if grep -q ERROR "$dir/out.log" "$dir/valgrind.log"; then grep -m3 ERROR "$dir/out.log" "$dir/valgrind.log" >&2; exit 1; fi
  grep -E '^(summary|totals):' "$dir/callgrind.out" | tail -1 | awk '{print $2}'
  rm -rf "$dir"
}
for peer in "${peers[@]}"; do
  name=$peer
  [[ $peer == p* ]] && name=${FILES[${peer#p}]}
  base=$(instructions "$peer" 1)
  run=$(instructions "$peer" $((N + 1)))
  echo "$name: $(((run - base) / N)) instructions per $WORKLOAD lifecycle"
done
