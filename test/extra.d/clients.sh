#!/usr/bin/env bash
# The client examples (examples/http): a Python, a Node and a Java HTTP
# endpoint on idem, each driven by examples/http/drive.py with a short
# load of concurrent duplicates and judged by the orders left behind.
# JDBC needs TCP, so the suite runs a cluster of its own on 127.0.0.1, with
# idem preloaded, on port PGPORT - 30000: below Linux's ephemeral range
# (32768-60999), where a client connection's own end may already hold a
# port, and one port per target, as run-tests gives its targets consecutive
# ones. The HTTP servers take any free port (PORT=0) and print it.
# Node's packages come from the npm registry, installed from the example's
# package-lock.json into a copy of it. Last line "clients: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
examples=$(pwd)/examples/http
node_chroot=$(pwd)/scripts/node-chroot.sh  # trixie's nodejs and npm
work=${IDEM_WORK:-/tmp}/clients-extra
rm -rf "$work" && mkdir -p "$work"
# (A run's ports below the ephemeral range already: 20 above its own.)
if [ "$PGPORT" -ge 32768 ]; then db_port=$((PGPORT - 30000)); else db_port=$((PGPORT + 20)); fi
passed=0
failed=0
server_pid=
server_port=

note_failure() { failed=$((failed + 1)); echo "not ok - $*"; }

stop_all() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  pg_ctl -D "$work/data" -m fast -w stop >/dev/null 2>&1
}
trap stop_all EXIT

initdb -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
cat >>"$work/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $db_port
unix_socket_directories = '$work'
shared_preload_libraries = 'idem'
max_connections = 100
fsync = off
CONF
pg_ctl -D "$work/data" -l "$work/server.log" -w start >/dev/null || { cat "$work/server.log"; exit 1; }
createdb -h 127.0.0.1 -p "$db_port" -U postgres clients || exit 1
psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$db_port" -U postgres -d clients \
  -f "$examples/setup.sql" >/dev/null || exit 1
app_url="postgresql://clients_app@127.0.0.1:$db_port/clients"
super_url="postgresql://postgres@127.0.0.1:$db_port/clients"

# Starts an example in the background and waits (deadline 120 s) for it to
# print "listening on port N"; sets server_port to N.
start_server() {  # name log command...
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  server_pid=$!
  local deadline=$((SECONDS + 120))
  until grep -q '^listening' "$log"; do
    if ! kill -0 "$server_pid" 2>/dev/null || [ $SECONDS -gt $deadline ]; then
      note_failure "$name: the server did not start"; tail -n 20 "$log"; server_pid=; return 1
    fi
    sleep 0.2  # polling the log for the server's own "listening", bounded by the deadline
  done
  server_port=$(sed -n 's/^listening on port \([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)
  if [ -z "$server_port" ]; then
    note_failure "$name: the server did not say its port"; head -n 5 "$log"; return 1
  fi
}

drive() {  # name http_port
  local name=$1 port=$2 out="$work/$1-drive.log"
  /usr/bin/python3 "$examples/drive.py" "$name" "http://127.0.0.1:$port/orders" "$super_url" \
    >"$out" 2>&1
  cat "$out"
  local line
  line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1)
  if [ -z "$line" ]; then note_failure "$name: the driver did not finish"; return; fi
  passed=$((passed + $(echo "$line" | awk '{print $2}')))
  failed=$((failed + $(echo "$line" | awk '{print $4}')))
}

finish_server() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  server_pid=
}

# Each request's work takes 50 ms, so duplicates overlap and meet 409s.
export WORK_MS=50

# Python: the package clients/python, installed into a virtual environment
# that sees Debian's python3-psycopg, -fastapi and -uvicorn.
cp -r "$examples/../../clients/python" "$work/python-package"
if /usr/bin/python3 -m venv --system-site-packages --without-pip "$work/venv" >"$work/pip.log" 2>&1 &&
   "$work/venv/bin/python" -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir \
     "$work/python-package" >>"$work/pip.log" 2>&1; then
  if start_server python "$work/python.log" env DATABASE_URL="$app_url" PORT=0 \
      "$work/venv/bin/python" "$examples/python/server.py"; then
    drive python "$server_port"
  fi
else
  note_failure "python: pip install ./clients/python failed"; tail -n 20 "$work/pip.log"
fi
finish_server

# Node: trixie's Debian nodejs and npm, from the test command's chroot
# (scripts/node-chroot.sh), not the host's; express and pg from the npm
# registry, as locked,
# and the package clients/node from this tree (file:../../../clients/node):
# both are copied with their places kept, without installed modules.
mkdir -p "$work/tree/examples/http" "$work/tree/clients"
cp -r "$examples/node" "$work/tree/examples/http/node"
cp -r clients/node "$work/tree/clients/node"
rm -rf "$work/tree/examples/http/node/node_modules" "$work/tree/clients/node/node_modules"
"$node_chroot" --describe || note_failure "node: no Node chroot"
if (cd "$work/tree/examples/http/node" && "$node_chroot" -- npm ci --no-audit --no-fund --cache "$work/npm-cache" >"$work/npm.log" 2>&1); then
  if start_server node "$work/node.log" env DATABASE_URL="$app_url" PORT=0 \
      "$node_chroot" -- node "$work/tree/examples/http/node/server.js"; then
    drive node "$server_port"
  fi
else
  note_failure "node: npm ci failed"; tail -n 20 "$work/npm.log"
fi
finish_server

# Java: Debian's default-jdk-headless and libpostgresql-jdbc-java; the
# source file is run as it is (java Server.java).
if start_server java "$work/java.log" env JDBC_URL="jdbc:postgresql://127.0.0.1:$db_port/clients?user=clients_app" \
    PORT=0 java -cp /usr/share/java/postgresql.jar "$examples/java/Server.java"; then
  drive java "$server_port"
fi
finish_server

echo "clients: $passed passed, $failed failed"
