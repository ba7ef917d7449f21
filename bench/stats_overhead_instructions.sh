#!/usr/bin/env bash
# What counting costs, in instructions: load-independent, so it can be
# measured exactly on a busy machine where tps is not. Runs a single-user
# backend under valgrind (callgrind) doing N new-key lifecycles, each its own
# transaction (claim, mark_succeeded, COMMIT, from a PL/pgSQL procedure: the
# server-side work of pgbench -M prepared without the network), once with
# shared_preload_libraries = 'idem' (counting) and once without (count() is a
# no-op), each from the same fresh data directory, and subtracts a run of
# one lifecycle, so start-up, loading the library and first-call caches
# (plans, catalog) cancel out.
# Usage (as root, like ./run-tests; needs valgrind): bench/stats_overhead_instructions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
N=${1:-1000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }

build_extension
WORK=$(mktemp -d /tmp/idem-instructions.XXXXXX)
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
make_private_install "$WORK/install"
[ "$(id -u)" -eq 0 ] && chown -R postgres "$WORK"
as_cluster_user "$PGBIN/initdb" -D "$WORK/template" -A trust -U postgres --no-sync >/dev/null
echo "fsync = off" >>"$WORK/template/postgresql.conf"
single() {  # data-dir < sql
  as_cluster_user "$PGBIN/postgres" --single -D "$1" postgres >/dev/null 2>&1
}
single "$WORK/template" <<'SQL'
CREATE EXTENSION idem;
CREATE PROCEDURE lifecycles(n int) LANGUAGE plpgsql AS $$ DECLARE f bigint; BEGIN FOR i IN 1..n LOOP SELECT fence INTO f FROM idem.claim_idempotency_key('bench', i::text, 'h'); PERFORM idem.mark_succeeded('bench', i::text, f, 201); COMMIT; END LOOP; END $$;
SQL

instructions() {  # preload lifecycles -> instructions executed by the backend
  local dir=$WORK/run-$1-$2
  cp -a "$WORK/template" "$dir"
  echo "shared_preload_libraries = '$1'" >>"$dir/postgresql.conf"
  echo "CALL lifecycles($2);" | as_cluster_user valgrind --tool=callgrind \
    --callgrind-out-file="$dir/callgrind.out" "$PGBIN/postgres" --single -D "$dir" postgres \
    >/dev/null 2>"$dir/valgrind.log"
  grep -E '^(summary|totals):' "$dir/callgrind.out" | tail -1 | awk '{print $2}'
}

counting_base=$(instructions idem 1)
counting_run=$(instructions idem $((N + 1)))
plain_base=$(instructions '' 1)
plain_run=$(instructions '' $((N + 1)))
counting=$(( (counting_run - counting_base) / N ))
plain=$(( (plain_run - plain_base) / N ))
echo "instructions per lifecycle, counting: $counting"
echo "instructions per lifecycle, plain:    $plain"
echo "difference: $((counting - plain)) instructions per lifecycle; ratio $(echo "scale=5; $counting / $plain" | bc)"
