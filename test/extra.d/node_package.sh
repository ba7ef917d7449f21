#!/usr/bin/env bash
# The Node package (clients/node, @idem/postgres): its node --test suites
# against a real server. A cluster of its own on 127.0.0.1 (node-postgres
# speaks TCP here, as an application does) with idem preloaded: the C++
# engine in one database (CREATE EXTENSION), and the portable engine in
# another, installed with psql -f dist/idem-portable.sql by that database's
# owner, a role without superuser; no CREATE EXTENSION there. Every suite runs
# on the C++ engine; the draft's cases, the fingerprint and the README's
# example run on the portable engine too, and the crash tests (a bound key
# freed when its session ends). The package's dependencies come
# from the npm registry, installed by npm ci from its package-lock.json into
# a copy of it. npm and node are trixie's (Debian's nodejs 20), from the
# test command's chroot (scripts/node-chroot.sh), not the host's. Ports:
# below Linux's ephemeral range (32768-60999), as clients.sh, and 10 above
# its port. Last line "node_package: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
tree=$(pwd)
work=${IDEM_WORK:-/tmp}/node-package-extra
rm -rf "$work" && mkdir -p "$work"
if [ "$PGPORT" -ge 32768 ]; then db_port=$((PGPORT - 30000 + 10)); else db_port=$((PGPORT + 10)); fi
passed=0
failed=0
skipped=0

note_failure() { failed=$((failed + 1)); echo "not ok - $*"; }
finish() { echo "node_package: $passed passed, $failed failed"; }
stop_all() { pg_ctl -D "$work/data" -m fast -w stop >/dev/null 2>&1; }
trap stop_all EXIT

initdb -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; note_failure "initdb"; finish; exit 1; }
cat >>"$work/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $db_port
unix_socket_directories = '$work'
shared_preload_libraries = 'idem'
max_connections = 150
fsync = off
CONF
pg_ctl -D "$work/data" -l "$work/server.log" -w start >/dev/null || { cat "$work/server.log"; note_failure "the server did not start"; finish; exit 1; }

sql() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$db_port" "$@"; }
setup_ok=1
# pg_read_all_stats: the portable engine reads the sessions bound keys
# belong to (the middleware binds by default) from pg_stat_activity.
sql -U postgres -d postgres -c 'CREATE ROLE idem_node_app LOGIN' -c 'CREATE ROLE idem_node_owner LOGIN' \
  -c 'GRANT pg_read_all_stats TO idem_node_owner' >/dev/null &&
  createdb -h 127.0.0.1 -p "$db_port" -U postgres node_cpp &&
  sql -U postgres -d node_cpp -c 'CREATE EXTENSION idem' &&
  sql -U postgres -d node_cpp -v app=idem_node_app -f clients/node/test/setup.sql >/dev/null &&
  createdb -h 127.0.0.1 -p "$db_port" -U postgres -O idem_node_owner node_portable &&
  sql -U idem_node_owner -d node_portable -f dist/idem-portable.sql >"$work/portable-install.log" &&
  sql -U idem_node_owner -d node_portable -v app=idem_node_app -f clients/node/test/setup.sql >/dev/null ||
  setup_ok=0
if [ $setup_ok = 0 ]; then note_failure "setting up the databases"; finish; exit 1; fi

# trixie's nodejs and npm, whatever the host has (scripts/node-chroot.sh).
in_node() { "$tree/scripts/node-chroot.sh" -- "$@"; }
"$tree/scripts/node-chroot.sh" --describe || { note_failure "no Node chroot"; finish; exit 1; }

cp -r clients/node "$work/node"
rm -rf "$work/node/node_modules" "$work/node"/.readme-*
if ! (cd "$work/node" && in_node npm ci --no-audit --no-fund --cache "$work/npm-cache" >"$work/npm.log" 2>&1); then
  note_failure "npm ci failed"; tail -n 20 "$work/npm.log"; finish; exit 1
fi

# Runs node --test on some of the package's test files against a database;
# adds its counts (a cancelled test is a failure; a skipped one is neither).
run_suite() {  # name database files...
  local name=$1 db=$2 log="$work/$1.tap"
  shift 2
  (cd "$work/node" && if [ "$1" = all ]; then set -- test/*.test.js; fi && IDEM_TEST_URL="postgresql://idem_node_app@127.0.0.1:$db_port/$db" NODE_ENV=test IDEM_README="$tree/README.md" IDEM_KEY_VECTORS="$tree/clients/conformance/idempotency-key.json" \
    timeout 600 "$tree/scripts/node-chroot.sh" -- node --test --test-concurrency=1 --test-reporter=tap "$@") >"$log" 2>&1
  local st=$? p f c s
  p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log" | tail -n 1)
  f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log" | tail -n 1)
  c=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$log" | tail -n 1)
  s=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$log" | tail -n 1)
  grep -E '^# ((powertools )?storm|pool):' "$log" | sed "s/^# /$name: /"
  grep -E '^(not )?ok [0-9]+ - ' "$log" | sed "s/^/$name: /"
  if [ -z "$p" ]; then note_failure "$name: node --test did not finish (status $st)"; tail -n 30 "$log"; return; fi
  passed=$((passed + p))
  failed=$((failed + ${f:-0} + ${c:-0}))
  skipped=$((skipped + ${s:-0}))
  [ "${f:-0}" = 0 ] && [ "${c:-0}" = 0 ] || grep -A 30 '^not ok' "$log" | head -n 80
  [ "$st" = 0 ] || [ "${f:-0}" != 0 ] || note_failure "$name: node --test exited with $st"
}

run_suite cpp node_cpp all
run_suite portable node_portable test/express.test.js test/draft_cases.test.js test/express_crash.test.js test/jcs.test.js test/readme.test.js \
  test/fastify_draft.test.js test/fastify_crash.test.js
[ $skipped = 0 ] || { echo "node_package: $skipped skipped:"; grep -h '# SKIP' "$work"/*.tap | sed 's/^/  /'; }
finish
